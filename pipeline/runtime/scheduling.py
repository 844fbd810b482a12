"""Cron schedules: parsing, and the fire times ``pipeline status`` reasons about.

A schedule is a standard 5-field crontab line (``0 9 * * *``) or a 6-field
one whose first field is seconds (``*/5 * * * * *``, handy in tests), in the
channel's time zone.

Fire times come from cronsim, which follows crontab(5): weekday 0 and 7 are
Sunday, names (``mon-fri``, ``jan``), and when both day-of-month and weekday
are restricted a day matching *either* fires. APScheduler 3's own
``CronTrigger.from_crontab`` reads 0 as Monday and ANDs the two day fields,
so a line copied from a crontab would fire on the wrong days; here APScheduler
only schedules, through ``CrontabTrigger``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger

from ..errors import ConfigError

_SECOND = timedelta(seconds=1)


class CrontabTrigger(BaseTrigger):
    """An APScheduler 3 trigger with crontab semantics (picklable: the daemon's job store keeps it)."""

    def __init__(self, expr: str, timezone: str) -> None:
        self.expr = " ".join(expr.split())
        self.timezone = timezone

    @property
    def tz(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    def _iter(self, start: datetime, reverse: bool = False) -> Iterator[datetime]:
        from cronsim import CronSim

        return CronSim(self.expr, start.astimezone(self.tz), reverse=reverse)

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        # APScheduler asks for the first fire time at or after `start` (as its CronTrigger does).
        start = now if previous_fire_time is None else min(now, previous_fire_time + timedelta(microseconds=1))
        if previous_fire_time is not None and start <= previous_fire_time:
            start = previous_fire_time + timedelta(microseconds=1)
        # CronSim yields strictly after the whole second it is given: step back one when `start` is exact.
        base = start - _SECOND if start.microsecond == 0 else start
        return next(self._iter(base), None)

    def previous_fire_time(self, now: datetime) -> datetime | None:
        """The last fire time at or before ``now``."""
        return next(self._iter(now + timedelta(microseconds=1), reverse=True), None)

    def __getstate__(self) -> dict[str, Any]:
        return {"version": 1, "expr": self.expr, "timezone": self.timezone}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.expr, self.timezone = state["expr"], state["timezone"]

    def __repr__(self) -> str:
        return f"<CrontabTrigger ({self.expr!r}, timezone={self.timezone!r})>"

    def __str__(self) -> str:
        return f"cron[{self.expr}] {self.timezone}"


def make_trigger(cron: str, timezone: str) -> CrontabTrigger:
    from cronsim import CronSimError

    fields = cron.split()
    if len(fields) not in (5, 6):
        raise ConfigError(f"schedule {cron!r}: expected 5 crontab fields (or 6 with seconds first)")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"schedule {cron!r}: unknown time zone {timezone!r} ({exc})") from None
    trigger = CrontabTrigger(cron, timezone)
    try:
        trigger._iter(datetime.now(trigger.tz))  # parses the expression
    except CronSimError as exc:
        raise ConfigError(f"schedule {cron!r} ({timezone}): {exc}") from None
    return trigger


def next_fire(trigger: CrontabTrigger, now: datetime) -> datetime | None:
    return trigger.get_next_fire_time(None, now)


def previous_fire(trigger: CrontabTrigger, now: datetime) -> datetime | None:
    """The last fire time at or before ``now`` (None if there is none)."""
    return trigger.previous_fire_time(now)
