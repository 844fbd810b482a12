"""``pipeline status``: the read model of each channel, the daemon on this host and the engine.

Beside ``pipeline.views.reports``, not in ``pipeline.ops.daemon``: looking at the state needs
neither the scheduler nor SQLAlchemy. The ledger is read with plain SQL through
``pipeline.ledger.reader`` (SQLite read-only, or PostgreSQL), so ``pipeline status``
starts fast and never creates or migrates a ledger. Results are frozen
dataclasses; ``as_dict()`` is the ``--json`` shape.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..states import ReviewStatus, RunStatus
from .reports import (
    Recovered,
    Unregistered,
    reconciled_registrations,
    unregistered_publications,
)

if TYPE_CHECKING:
    from ..config import Config

# A last run in one of these states is a decision or work in progress, not a failure.
NOT_FAILED = ("done", "running", "awaiting_review", "rejected", "dry_run")
# A run whose review is in one of these states holds its article for an editor (approved: not finished yet).
HELD_REVIEWS = (ReviewStatus.PENDING, ReviewStatus.APPROVED)

# A tick is overdue only this long past its time, and then only if nothing started for it (a run that
# started a little before the tick it serves, a clock a little behind, is not late).
TICK_SLACK_S = 60
# The daemon is dead when its last heartbeat is older than this many [daemon] heartbeat_s.
BEATS_MISSED = 3

# `pipeline status` exit codes (README "Health"): "awaiting_review" is the run's own code for it (ExitCode.AWAITING_REVIEW).
HEALTH_EXIT = {"ok": 0, "awaiting_review": 8, "failed": 1, "overdue": 1, "scheduler_down": 3}
# Worst last: the channel that decides `pipeline status`'s exit code (an editor's wait is not a failure).
HEALTH_ORDER = ("ok", "awaiting_review", "failed", "overdue", "scheduler_down")


def health_exit(healths: list[str]) -> int:
    """The exit code of ``pipeline status``: the worst channel's health (HEALTH_ORDER) decides."""
    return HEALTH_EXIT[max(healths, key=HEALTH_ORDER.index)] if healths else 0


@dataclass(frozen=True)
class SchedulerState:
    """What fires this deployment's ticks ([daemon] scheduler), since when, and whether it is alive.

    ``began``: ticks before it are nobody's fault (the scheduler did not exist yet) and never overdue.
    ``alive``: None where liveness cannot be proven from here (cron, manual).
    """

    kind: str  # manual | daemon | cron
    alive: bool | None
    began: datetime | None
    reason: str
    heartbeat_at: datetime | None = None
    host: str | None = None
    pid: int | None = None

    @property
    def down(self) -> bool:
        return self.alive is False

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "alive": self.alive, "began": self.began.isoformat() if self.began else None,
                "heartbeat_at": self.heartbeat_at.isoformat() if self.heartbeat_at else None, "host": self.host,
                "pid": self.pid, "reason": self.reason}


def scheduler_state(cfg: Config, db: Any, now: datetime) -> SchedulerState:
    """The declared scheduler's state. One branch per kind, so another liveness proof (a lease) slots in."""
    kind = cfg.daemon.scheduler
    if kind == "daemon":
        return _daemon_liveness(cfg, db, now)
    # Whatever is declared, a daemon that ran on this ledger and died (its heartbeat stale, no stop recorded)
    # with no run since is never silent: it was what scheduled these channels.
    dead = _daemon_liveness(cfg, db, now) if db is not None else None
    if dead is not None and dead.down and dead.heartbeat_at is not None and "died" in dead.reason:
        latest = db.scalar("SELECT max(started_at) FROM runs")
        if latest is None or _as_time(latest) <= dead.heartbeat_at:
            return SchedulerState(kind, False, dead.began, f'[daemon] scheduler = "{kind}", but {dead.reason}, and no run '
                                  "started since", dead.heartbeat_at, dead.host, dead.pid)
    if kind == "cron":
        began = cfg.daemon.cron_began()
        assert began is not None  # DaemonConfig refuses scheduler = "cron" without cron_since
        return SchedulerState("cron", None, began, f"cron, installed {began.isoformat()} ([daemon] cron_since)")
    return SchedulerState("manual", None, None, 'no scheduler declared ([daemon] scheduler = "manual"): no tick is overdue')


def _as_time(value: Any) -> datetime:
    """A time from either reader (SQLite gives text, PostgreSQL a datetime), aware in UTC."""
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _daemon_liveness(cfg: Config, db: Any, now: datetime) -> SchedulerState:
    """``pipeline daemon`` writes a row when it starts, a heartbeat every heartbeat_s, and its stop."""
    from ..errors import LedgerError

    row = None
    if db is not None:
        try:
            found = db.rows("SELECT id, host, pid, started_at, beat_at, stopped_at FROM daemons "
                            "ORDER BY started_at DESC LIMIT 1")
            row = found[0] if found else None
        except LedgerError:  # a ledger from before heartbeats (no daemons table): no daemon has run on it
            getattr(getattr(db, "conn", None), "rollback", lambda: None)()
    if row is None or row.stopped_at is not None:
        here = daemon_state(cfg)
        if here.running:  # its lock is held, its first row not written yet: starting, not absent
            return SchedulerState("daemon", None, None, f"daemon pid {here.pid} on this host is starting "
                                                        "(its lock is held; no heartbeat in the ledger yet)")
    if row is None:
        return SchedulerState("daemon", False, None, "no daemon has started on this ledger (start `pipeline daemon`)")
    who = f"daemon {row.host} pid {row.pid}"
    if row.stopped_at is not None:
        return SchedulerState("daemon", False, row.started_at, f"{who} stopped at {row.stopped_at.isoformat()}",
                              row.beat_at, row.host, row.pid)
    age = (now - row.beat_at).total_seconds()
    if age > BEATS_MISSED * cfg.daemon.heartbeat_s:
        return SchedulerState("daemon", False, row.started_at,
                              f"{who} last beat {round(age)} s ago (every {cfg.daemon.heartbeat_s:g} s expected): "
                              "it died without stopping", row.beat_at, row.host, row.pid)
    return SchedulerState("daemon", True, row.started_at, f"{who} alive since {row.started_at.isoformat()}",
                          row.beat_at, row.host, row.pid)


@dataclass(frozen=True)
class PendingReview:
    """A held article waiting for an editor (or approved and not finished)."""

    run_id: str
    title: str
    status: str
    preview: str | None
    requested_at: str

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "title": self.title, "status": self.status, "preview": self.preview,
                "requested_at": self.requested_at}


@dataclass(frozen=True)
class ChannelStatus:
    """Per channel: next fire, last run and its age, publications today, overdue or failed."""

    channel: str
    cron: str
    timezone: str
    next_run: str | None
    last_run: str | None
    last_status: str | None
    last_exit_code: int | None
    last_age_s: int | None
    publications_today: int
    overdue: bool
    failed: bool
    reconciled_today: list[Recovered]
    awaiting_registration: list[Unregistered]
    awaiting_review: list[PendingReview]
    health: str = "ok"  # a key of HEALTH_EXIT
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel, "cron": self.cron, "timezone": self.timezone, "next_run": self.next_run,
            "last_run": self.last_run, "last_status": self.last_status, "last_exit_code": self.last_exit_code,
            "last_age_s": self.last_age_s, "publications_today": self.publications_today, "overdue": self.overdue,
            "failed": self.failed, "health": self.health, "reason": self.reason,
            "reconciled_today": [r.as_dict(channel=False) for r in self.reconciled_today],
            "awaiting_registration": [r.as_dict(channel=False) for r in self.awaiting_registration],
            "awaiting_review": [r.as_dict() for r in self.awaiting_review],
        }


@dataclass(frozen=True)
class DaemonState:
    """Whether a daemon serves this config's state dir on this host (it holds ``daemon.lock`` while it lives)."""

    running: bool
    pid: int | None
    lock: str

    def as_dict(self) -> dict[str, Any]:
        return {"running": self.running, "pid": self.pid, "lock": self.lock}


@dataclass(frozen=True)
class EngineStatus:
    """Who schedules and who runs: the leading daemon (PostgreSQL), Celery workers seen and queue depth."""

    engine: str
    postgres: bool = False  # the scheduler's lead is known only with a PostgreSQL ledger
    scheduler_leader: str | None = None
    workers: list[str] | None = None  # None: not asked (no Celery), or the broker did not answer
    queue_depth: int | None = None
    broker_error: str | None = None
    leader_pid: int | None = None

    def daemon(self) -> DaemonState:
        """With a PostgreSQL ledger, a daemon runs (somewhere) when one holds the scheduler's lead."""
        return DaemonState(self.scheduler_leader is not None, self.leader_pid, "the scheduler's lead (PostgreSQL advisory lock)")

    def as_dict(self) -> dict[str, Any]:
        info: dict[str, Any] = {"engine": self.engine}
        if self.postgres:
            info["scheduler_leader"] = self.scheduler_leader
        if self.workers is not None:
            info["workers"] = self.workers
        if self.queue_depth is not None:
            info["queue_depth"] = self.queue_depth
        if self.broker_error is not None:
            info["broker_error"] = self.broker_error
        return info


@dataclass(frozen=True)
class ReviewView:
    """One review as ``pipeline review list/show`` print it."""

    run_id: str
    channel: str
    status: str
    title: str
    score: float | None
    preview: str | None
    requested_at: str
    decided_by: str | None
    decided_at: str | None
    reason: str | None
    completed: bool
    url: str | None = None
    body: str | None = None
    weakest: tuple[str, ...] = ()  # the paragraphs that scored lowest, quoted with their scores
    # "unvalidated for <model>: ..." when the run's writer is not one the score's scorer was validated on
    # (pipeline.score.validity); "" when it is.
    score_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "weakest": list(self.weakest)}


_REVIEWS = ("SELECT v.run_id, r.channel, v.status, a.title, a.score, v.preview, v.requested_at, v.decided_by, "
            "v.decided_at, v.reason, v.completed_at, a.body, a.score_paragraphs_json, a.scorer, a.language, "
            "r.model FROM reviews v "
            "JOIN runs r ON r.id = v.run_id JOIN articles a ON a.id = v.article_id")


def _review_view(row: Any, url: str | None = None, body: bool = False) -> ReviewView:
    from ..score.scoring import weakest_stored
    from ..score.validity import validity

    note = validity(row.scorer, row.language, row.model).label if row.score is not None else ""
    return ReviewView(row.run_id, row.channel, row.status, row.title, row.score, row.preview, row.requested_at.isoformat(),
                      row.decided_by, row.decided_at.isoformat() if row.decided_at else None, row.reason,
                      row.completed_at is not None, url, row.body if body else None,
                      tuple(weakest_stored(row.body, row.score_paragraphs_json)), note)


def reviews(ledger: Any, channel: str | None = None, *, all_states: bool = False) -> list[ReviewView]:
    """Reviews waiting for a decision (or approved and not finished), oldest first; every review with ``all_states``.
    ``ledger``: a Ledger or a LedgerReader."""
    from ..ledger.reader import reader_for

    db = reader_for(ledger)
    rows = (db.rows(f"{_REVIEWS} WHERE r.channel = :c ORDER BY v.id", c=channel) if channel is not None
            else db.rows(f"{_REVIEWS} ORDER BY v.id"))
    return [_review_view(r) for r in rows
            if all_states or r.status == ReviewStatus.PENDING or (r.status == ReviewStatus.APPROVED and r.completed_at is None)]


def review_of(ledger: Any, run_id: str) -> ReviewView | None:
    """The review of one run, with its text and the URL it was published at; None if it has none."""
    from ..ledger.reader import reader_for

    db = reader_for(ledger)
    found = db.rows(f"{_REVIEWS} WHERE v.run_id = :r", r=run_id)
    if not found:
        return None
    url = db.scalar("SELECT url FROM publications WHERE run_id = :r AND status = 'verified' ORDER BY id LIMIT 1", r=run_id)
    return _review_view(found[0], url, body=True)


def _pending_reviews(db: Any, channel: str) -> list[PendingReview]:
    return [PendingReview(r.run_id, r.title, r.status, r.preview, r.requested_at) for r in reviews(db, channel)]


def channel_status(cfg: Config, now: datetime | None = None, ledger: Any = None,
                   scheduler: list[SchedulerState] | None = None) -> list[ChannelStatus]:
    """Every channel of ``cfg``. ``ledger``: a Ledger or reader to use; by default the config's ledger is
    opened read-only (a missing SQLite file means nothing has run: no ledger is created).
    ``scheduler``: a list to receive the scheduler's state."""
    from zoneinfo import ZoneInfo

    from ..ledger.reader import LedgerReader, reader_for, sqlite_path
    from ..runtime.scheduling import make_trigger, next_fire, previous_fire

    now = now or datetime.now(timezone.utc)
    opened: LedgerReader | None = None
    db: Any = None
    if ledger is not None:
        db = reader_for(ledger)
    else:
        path = sqlite_path(cfg.ledger_url)
        if path is None or path.exists():
            db = opened = LedgerReader(cfg.ledger_url)
    try:
        sched = scheduler_state(cfg, db, now)
        if scheduler is not None:
            scheduler.append(sched)
        return [_channel(cfg, name, db, now, sched, make_trigger, next_fire, previous_fire, ZoneInfo)
                for name in cfg.channel_names()]
    finally:
        if opened is not None:
            opened.close()


def _channel(cfg: Config, name: str, db: Any, now: datetime, sched: SchedulerState, make_trigger: Any, next_fire: Any,
             previous_fire: Any, zone_info: Any) -> ChannelStatus:
    chan = cfg.for_channel(name).channel
    trigger = make_trigger(chan.cron, chan.timezone)
    tz = zone_info(chan.timezone)
    day_start = datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0).astimezone(timezone.utc)
    last, published, awaiting, reconciled, reviews, first_tick = None, 0, [], [], [], None
    if db is not None:
        found = db.rows("SELECT id, status, exit_code, started_at FROM runs WHERE channel = :c "
                        "ORDER BY started_at DESC, id DESC LIMIT 1", c=name)
        last = found[0] if found else None
        published = int(db.scalar("SELECT count(*) FROM publications p JOIN runs r ON r.id = p.run_id "
                                  "WHERE r.channel = :c AND p.status = 'verified' AND p.verified_at >= :d",
                                  c=name, d=db.time_param(day_start)) or 0)
        # Publications a crashed/interrupted run left unregistered, and those reconciliation registered today.
        awaiting = unregistered_publications(db, name)
        reconciled = reconciled_registrations(db, name, since=day_start)
        reviews = _pending_reviews(db, name)
        found = db.rows("SELECT min(scheduled_for) AS first_at FROM ticks WHERE channel = :c", c=name)
        first_tick = found[0].first_at if found else None
    started = last.started_at if last else None
    # The latest tick past its grace: overdue if the scheduler existed then and no run started for it.
    prev = previous_fire(trigger, now - timedelta(seconds=cfg.daemon.overdue_after_s))
    # Overdue: a firing after the scheduler began, past its grace, with no run for it. A channel whose first
    # queued tick is newer than that firing was not scheduled then (a tick waiting in the queue is not overdue).
    overdue = (prev is not None and sched.began is not None and prev >= sched.began
               and (started is None or started < prev - timedelta(seconds=TICK_SLACK_S))
               and (first_tick is None or first_tick <= prev))
    # An article held for an editor (a manual review, or a score under the pass mark) is a business state.
    held = last is not None and (last.status == RunStatus.AWAITING_REVIEW
                                 or any(r.run_id == last.id and r.status in HELD_REVIEWS for r in reviews))
    failed = not held and last is not None and last.status not in NOT_FAILED  # a rejection, a dry run: decisions
    if sched.down:
        health, reason = "scheduler_down", sched.reason
    elif overdue:
        health = "overdue"
        reason = (f"the {prev.isoformat()} tick is {round((now - prev).total_seconds())} s old "
                  f"(grace [daemon] overdue_after_s = {cfg.daemon.overdue_after_s}) and no run started for it")
    elif failed and last is not None:
        health, reason = "failed", f"last run {last.id} ended {last.status} (exit {last.exit_code})"
    elif held and last is not None:
        health, reason = "awaiting_review", (f"last run {last.id} holds its article for an editor: "
                                             f"pipeline review show {last.id}")
    else:
        health, reason = "ok", (f"last run {last.id} {last.status}" if last else "no run yet, none due") + f"; {sched.reason}"
    nf = next_fire(trigger, now)
    return ChannelStatus(
        channel=name, cron=chan.cron, timezone=chan.timezone,
        next_run=nf.isoformat() if nf else None,
        last_run=last.id if last else None, last_status=last.status if last else None,
        last_exit_code=last.exit_code if last else None,
        last_age_s=round((now - started).total_seconds()) if started else None,
        publications_today=published, overdue=overdue, failed=failed,
        reconciled_today=reconciled, awaiting_registration=awaiting, awaiting_review=reviews,
        health=health, reason=reason,
    )


def daemon_state(cfg: Config) -> DaemonState:
    """Is a daemon serving this config's state dir on this host? It holds ``daemon.lock`` while it lives.

    (With a PostgreSQL ledger the lead is an advisory lock on the server; this sees this host only.)
    """
    import fcntl

    path = cfg.state_dir / "daemon.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return DaemonState(False, None, str(path))  # never started here
    try:
        try:
            # A shared lock is refused while the daemon holds its exclusive one; taken, it is dropped at once.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return DaemonState(True, int(pid) if pid.isdigit() else None, str(path))
    finally:
        os.close(fd)
    return DaemonState(False, None, str(path))
