"""Cron schedules: parsing, and the fire times ``pipeline status`` reasons about.

A schedule is a standard 5-field crontab line (``0 9 * * *``) or a 6-field
one whose first field is seconds (``*/5 * * * * *``, handy in tests), in the
channel's time zone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .errors import ConfigError


def make_trigger(cron: str, timezone: str):
    from apscheduler.triggers.cron import CronTrigger

    fields = cron.split()
    try:
        if len(fields) == 5:
            return CronTrigger.from_crontab(cron, timezone=timezone)
        if len(fields) == 6:
            second, minute, hour, day, month, dow = fields
            return CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=dow,
                               timezone=timezone)
    except (ValueError, LookupError) as exc:
        raise ConfigError(f"schedule {cron!r} ({timezone}): {exc}") from None
    raise ConfigError(f"schedule {cron!r}: expected 5 crontab fields (or 6 with seconds first)")


def next_fire(trigger, now: datetime) -> datetime | None:
    return trigger.get_next_fire_time(None, now)


def previous_fire(trigger, now: datetime, lookback: timedelta = timedelta(days=8), limit: int = 50_000) -> datetime | None:
    """The last fire time at or before ``now`` within ``lookback`` (None if there is none)."""
    t = trigger.get_next_fire_time(None, now - lookback)
    last = None
    for _ in range(limit):
        if t is None or t > now:
            return last
        last = t
        t = trigger.get_next_fire_time(t, t + timedelta(microseconds=1))
    return last
