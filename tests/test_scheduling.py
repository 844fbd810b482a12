"""Cron schedules fire when crontab(5) says they do: weekday 0 and 7 are Sunday, names, ranges, day OR weekday."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from pipeline.errors import ConfigError
from pipeline.runtime.scheduling import make_trigger, next_fire, previous_fire

NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
         "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10,
         "nov": 11, "dec": 12}


def _field(spec: str, lo: int, hi: int) -> set[int]:
    """A crontab field as crontab(5) defines it, written independently of the code under test."""
    out: set[int] = set()
    for part in spec.lower().split(","):
        rng, _, step = part.partition("/")
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (int(NAMES.get(x, x)) for x in rng.split("-"))
        else:
            a = b = int(NAMES.get(rng, rng))
            if step:
                b = hi
        out.update(range(a, b + 1, int(step or 1)))
    return out


def crontab_next(expr: str, after: datetime) -> datetime:
    """Brute force, minute by minute (a day or an hour that cannot match is passed over whole): the first time
    after ``after`` that crontab would fire."""
    minute, hour, dom, month, dow = expr.split()
    mins, hours, doms, months = _field(minute, 0, 59), _field(hour, 0, 23), _field(dom, 1, 31), _field(month, 1, 12)
    dows = {d % 7 for d in _field(dow, 0, 7)}  # 7 is Sunday too
    t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(60 * 24 * 400):
        day_ok_dom, day_ok_dow = t.day in doms, (t.isoweekday() % 7) in dows
        # crontab(5): if both day fields are restricted, either one matching is enough.
        day_ok = (day_ok_dom or day_ok_dow) if not (dom.startswith("*") or dow.startswith("*")) else (day_ok_dom and day_ok_dow)
        if not (t.month in months and day_ok):  # no minute of this day fires
            t = t.replace(hour=0, minute=0) + timedelta(days=1)
        elif t.hour not in hours:  # no minute of this hour fires
            t = t.replace(minute=0) + timedelta(hours=1)
        elif t.minute in mins:
            return t
        else:
            t += timedelta(minutes=1)
    raise AssertionError(f"no fire time for {expr}")


EXPRESSIONS = [
    "0 9 * * 0", "0 9 * * 7", "0 9 * * 1", "0 9 * * 6", "30 6 * * 1-5", "0 9 * * 5-7", "0 9 * * 0-2",
    "0 9 * * sun", "0 9 * * mon-fri", "0 9 * * SAT,SUN", "15 */6 * * 2", "0 0 13 * 5", "0 12 1 jan-mar *",
    "0 9 * * */2", "5 4 * * 0,3,7",
]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_next_fire_times_follow_crontab(expr):
    trigger = make_trigger(expr, "UTC")
    t = datetime(2026, 11, 30, 9, 30, tzinfo=timezone.utc)  # a Monday
    for _ in range(6):
        expected = crontab_next(expr, t)
        got = next_fire(trigger, t + timedelta(seconds=1))
        assert got == expected, f"{expr}: after {t:%a %Y-%m-%d %H:%M} expected {expected:%a %Y-%m-%d %H:%M}, got {got:%a %Y-%m-%d %H:%M}"
        t = expected


def test_sunday_is_sunday():
    monday = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
    for expr in ("0 9 * * 0", "0 9 * * 7", "0 9 * * sun"):
        nxt = next_fire(make_trigger(expr, "UTC"), monday)
        assert nxt.strftime("%A %Y-%m-%d %H:%M") == "Sunday 2026-12-06 09:00", expr
    weekdays = make_trigger("0 9 * * 1-5", "UTC")
    t, days = monday, []
    for _ in range(5):
        t = next_fire(weekdays, t + timedelta(seconds=1))
        days.append(t.strftime("%a"))
    assert days == ["Tue", "Wed", "Thu", "Fri", "Mon"]


def test_time_zone_and_exact_second_are_honoured():
    trigger = make_trigger("0 9 * * *", "Asia/Shanghai")
    at_nine = datetime(2026, 12, 1, 9, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert next_fire(trigger, at_nine) == at_nine  # at or after `now`, as APScheduler asks
    assert previous_fire(trigger, at_nine) == at_nine
    assert previous_fire(trigger, at_nine - timedelta(seconds=1)) == at_nine - timedelta(days=1)
    assert trigger.get_next_fire_time(at_nine, at_nine) == at_nine + timedelta(days=1)  # never the same tick twice


def test_six_fields_with_seconds_and_pickling():
    trigger = make_trigger("*/5 * * * * *", "UTC")
    t = datetime(2026, 11, 30, 9, 0, 1, tzinfo=timezone.utc)
    assert next_fire(trigger, t) == t.replace(second=5)
    again = pickle.loads(pickle.dumps(trigger))
    assert repr(again) == repr(trigger) and next_fire(again, t) == t.replace(second=5)


@pytest.mark.parametrize("expr,tz", [("0 9 * *", "UTC"), ("0 25 * * *", "UTC"), ("0 9 * * 8", "UTC"),
                                     ("0 9 * * *", "Mars/Olympus")])
def test_bad_schedules_are_config_errors(expr, tz):
    with pytest.raises(ConfigError):
        make_trigger(expr, tz)
