"""The ledger: the one write path to the system's record of what it did.

Every write goes through ``Ledger.write()``, which opens a transaction with
``BEGIN IMMEDIATE`` on SQLite so two processes never both
believe they hold the next registration number; the context manager returns
only after COMMIT, so a caller that reports success after it really has
durable rows. SQLite runs in WAL mode with ``synchronous=FULL`` and a busy
timeout. On PostgreSQL each write transaction first takes a transaction-scoped
advisory lock, the same one-writer-at-a-time rule. The schema is brought to this
program's revision at open (``pipeline.ledger.migrations``).

Reads that feed the guard come from here too: ``facts(run_id)`` is the set of
capabilities that *really executed and succeeded* in a run, with the values
they recorded. Nothing the model wrote can add to it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import make_transient
from sqlmodel import Session, SQLModel, create_engine, select

from ..errors import EnvironmentFailure, LedgerError, TickAlreadyRun
from ..states import RunStatus
from ..text import redact
from . import disk, migrations

# Fact lives in a module without SQLAlchemy, so the read commands can share it.
from .facts import Fact, fact_from_execution  # also re-exported
from .models import Claim, Daemon, Execution, GuardEvent, ModelCall, ProviderCapability, Run, Tick, TickEvent, Turn
from .utc import aware, sqlite_text, utcnow

# Tick lifecycle lines (received, busy, claimed, settled, finished): INFO in workers and daemons.
tick_log = logging.getLogger("pipeline.ticks")

# pg_advisory_xact_lock key every write transaction of a PostgreSQL ledger takes ("LEDGERW").
_PG_WRITE_LOCK_KEY = 0x4C45444745525701


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"r{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


# Threads of one process queue on this lock before BEGIN IMMEDIATE. SQLite's busy handler
# sleeps in coarse steps (up to 100 ms), so 20 daemon threads contending through it alone
# would spend most of their time asleep; other processes still meet the busy timeout.
_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(url: str) -> threading.Lock:
    with _write_locks_guard:
        return _write_locks.setdefault(url, threading.Lock())


def _sqlite_pragmas(busy_timeout_ms: int) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy (not pysqlite) decide when transactions begin: the
        # "begin" hook below then emits BEGIN IMMEDIATE for writes.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    return on_connect


@event.listens_for(Session, "before_flush")
def _redact_secrets(session: Session, _ctx: Any, _instances: Any) -> None:
    """No configured secret is ever written to the ledger, whatever a remote system echoed into the text."""
    if redact._pattern is None:
        return
    for obj in (*session.new, *session.dirty):
        for name, value in vars(obj).items():
            if isinstance(value, str) and not name.startswith("_"):
                clean = redact.scrub(value)
                if clean != value:
                    setattr(obj, name, clean)


def _sqlite_begin(conn: Any) -> None:
    mode = "IMMEDIATE" if conn.get_execution_options().get("ledger_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


class Ledger:
    """The SQL ledger. Open one per process; it is safe to share across threads."""

    def __init__(self, url: str, busy_timeout_ms: int = 5000, *, migrate: bool = True) -> None:
        """Open the ledger at ``url``, migrating its schema to this program's (``migrate=False``: as it is)."""
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.is_postgres = url.startswith("postgres")
        self._lock = _write_lock(url) if self.is_sqlite else threading.Lock()
        # Records of what the model *said* (turns, opened executions) ride along with the next
        # write instead of paying a commit (an fsync) each; facts are never deferred.
        # (record, parent, attribute): ``record.<attribute>`` is set to the parent's id once it is flushed.
        self._deferred: list[tuple[SQLModel, SQLModel | None, str]] = []
        self._deferred_lock = threading.Lock()
        self._seq: dict[str, int] = {}
        try:
            if self.is_sqlite and url.startswith("sqlite:///") and ":memory:" not in url:
                Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            kwargs: dict[str, Any] = {}
            if self.is_sqlite:
                kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
            else:
                # A server connection can die under us (restart, pg_terminate_backend): test it at checkout.
                kwargs["pool_pre_ping"] = True
            self.engine: Engine = create_engine(url, **kwargs)
            if self.is_sqlite:
                event.listen(self.engine, "connect", _sqlite_pragmas(busy_timeout_ms))
                event.listen(self.engine, "begin", _sqlite_begin)
            # What this open changed in the schema (None: nothing; the ledger was current).
            self.migration = migrations.ensure_current(self.engine) if migrate else None
        except (SQLAlchemyError, OSError) as exc:
            from .unreachable import unavailable

            raise unavailable(url, exc) from None  # one line, exit 2: the server's or the file's reason

    # --- transactions -----------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction. Returns only after COMMIT; rolls back on error.

        Deferred records are inserted first, in order, so they commit with this transaction.
        """
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, []
        try:
            with self._lock, self.engine.connect() as conn:
                conn = conn.execution_options(ledger_write=True)
                with conn.begin():
                    if self.is_postgres:
                        # PostgreSQL's counterpart of BEGIN IMMEDIATE: writers take turns, so a
                        # read-then-write (the next registration number) is never raced.
                        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_WRITE_LOCK_KEY})")
                    with Session(bind=conn, expire_on_commit=False) as session:
                        for obj, parent, attr in deferred:
                            if parent is not None:
                                setattr(obj, attr, parent.id)  # the parent was flushed just before, or committed earlier
                            session.add(obj)
                            session.flush()
                        yield session
                        session.flush()
        except BaseException as exc:
            # Not committed: keep the deferred records for the next write, as new rows again
            # (the rolled-back INSERT left them looking persistent, with ids that do not exist).
            for obj, _parent, _attr in deferred:
                if inspect(obj).has_identity:
                    make_transient(obj)
                    obj.id = None
            with self._deferred_lock:
                self._deferred[:0] = deferred
            if isinstance(exc, OperationalError):
                where = self.sqlite_path
                if where is not None and disk.is_full(exc.orig, where.parent):
                    raise EnvironmentFailure(f"{disk.describe(where.parent)}: ledger write failed ({exc.orig})") from None
                raise LedgerError(f"ledger write failed: {exc.orig}") from None
            raise

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file, when the ledger is one."""
        prefix = "sqlite:///"
        if not self.url.startswith(prefix) or ":memory:" in self.url:
            return None
        return Path(self.url[len(prefix):])

    def drop_deferred(self) -> int:
        """Forget records not yet committed (last resort when even the run's final row cannot be written)."""
        with self._deferred_lock:
            n, self._deferred = len(self._deferred), []
        return n

    def defer(self, obj: SQLModel, parent: SQLModel | None = None, attr: str = "turn_id") -> None:
        """Insert ``obj`` with the next write (``parent``: a row, deferred or not, whose id goes in ``obj.<attr>``)."""
        with self._deferred_lock:
            self._deferred.append((obj, parent, attr))

    def flush(self) -> None:
        """Commit deferred records now."""
        if self._deferred:
            with self.write():
                pass

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def close(self) -> None:
        self.flush()
        self.engine.dispose()

    # --- outside readers ------------------------------------------------------

    def checkpoint(self) -> bool:
        """SQLite: move the WAL into the database file and truncate it, so ``ledger.db`` alone is the whole
        ledger (a copy of the file, ``datasette -i``, ``?immutable=1``). False when a reader kept it from
        completing (it is retried at the next call); True on PostgreSQL, which has no such file."""
        if not self.is_sqlite or self.sqlite_path is None:
            return True
        try:
            with self._lock, self.engine.connect() as conn:
                busy, _log, _done = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                conn.rollback()
            return not busy
        except OperationalError:
            return False

    # --- daemons' heartbeats ------------------------------------------------------

    def daemon_started(self) -> str:
        """A row for this daemon process; returns its id for ``daemon_beat`` and ``daemon_stopped``."""
        row = Daemon(id=f"{_me()}:{secrets.token_hex(3)}", host=socket.gethostname(), pid=os.getpid())
        with self.write() as s:
            s.add(row)
        return row.id

    def daemon_beat(self, daemon_id: str) -> None:
        with self.write() as s:
            row = s.get(Daemon, daemon_id)
            if row is not None:
                row.beat_at = utcnow()
                s.add(row)

    def daemon_stopped(self, daemon_id: str) -> None:
        with self.write() as s:
            row = s.get(Daemon, daemon_id)
            if row is not None:
                row.beat_at = row.stopped_at = utcnow()
                s.add(row)

    # --- runs -------------------------------------------------------------

    def start_run(self, model: str, channel: str = "default", guard_enabled: bool = True,
                  tick: datetime | None = None, lease_s: float | None = None) -> Run:
        """A new run row; with ``tick``, the channel's scheduled firing it serves is claimed in the same transaction.

        Raises TickAlreadyRun when that tick already completed. A tick still ``claimed`` belongs to a
        run that died (the caller holds the channel lock, so no live run can hold it): claimed again.
        ``lease_s``: the claim's lease, which the run renews (``renew_lease``).
        """
        run = Run(id=new_run_id(), model=model, channel=channel, guard_enabled=guard_enabled)
        with self.write() as s:
            s.add(run)
            if tick is not None:
                s.flush()  # the run row first: the tick references it
                self._claim_tick(s, channel, tick, run.id, lease_s)
        return run

    def _claim_tick(self, s: Session, channel: str, tick: datetime, run_id: str, lease_s: float | None) -> None:
        row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
        if row is not None and row.state == "done":
            raise TickAlreadyRun(f"skipped: the {tick.isoformat()} tick of channel {channel} already ran ({row.run_id})")
        now = self.clock(s)
        kind, detail = "claimed", None
        if row is None:
            row = Tick(channel=channel, scheduled_for=tick, attempts=0)
        elif row.state == "claimed":
            kind, detail = "reclaimed", f"attempt {row.attempts + 1}; the run before, {row.run_id}, died"
        row.state, row.attempts, row.run_id, row.claimed_by, row.claimed_at = "claimed", row.attempts + 1, run_id, _me(), now
        row.lease_until = now + timedelta(seconds=lease_s) if lease_s else None
        s.add(row)
        s.flush()
        self._event(s, row, kind, detail, run_id)

    @staticmethod
    def _event(s: Session, row: Tick, kind: str, detail: str | None = None, run_id: str | None = None) -> None:
        """One tick event, in the caller's transaction, and the same line in the log (a worker's or daemon's)."""
        s.add(TickEvent(tick_id=row.id, run_id=run_id, kind=kind, detail=detail, actor=_me()))
        tick_log.info("tick %s@%s %s%s%s", row.channel, row.scheduled_for.isoformat(), kind,
                      f" (run {run_id})" if run_id else "", f": {detail}" if detail else "")

    def clock(self, s: Session | None = None) -> datetime:
        """Now on the ledger's clock: the server's on PostgreSQL (hosts' clocks differ), this host's on SQLite."""
        if not self.is_postgres:
            return utcnow()
        if s is not None:
            return aware(s.exec(text("SELECT now()")).one()[0])  # type: ignore[call-overload]
        with self.engine.connect() as conn:
            return aware(conn.exec_driver_sql("SELECT now()").scalar())

    def tick_row(self, channel: str, tick: datetime) -> Tick | None:
        with self.read() as s:
            return s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()

    def queue_tick(self, channel: str, tick: datetime) -> bool:
        """The daemon's row for a tick it is about to send (``queued``); False if the tick is already done."""
        with self.write() as s:
            row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
            if row is not None and row.state == "done":
                return False
            now = self.clock(s)
            if row is None:
                row = Tick(channel=channel, scheduled_for=tick, state="queued", attempts=0, claimed_at=now)
            row.queued_at = now
            s.add(row)
            s.flush()
            self._event(s, row, "queued")
        return True

    def tick_event(self, channel: str, tick: datetime, kind: str, detail: str | None = None,
                   run_id: str | None = None) -> None:
        """Record a delivery's decision; a tick nobody queued gets its ``queued`` row first (a trace either way)."""
        with self.write() as s:
            row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
            if row is None:
                now = self.clock(s)
                row = Tick(channel=channel, scheduled_for=tick, state="queued", attempts=0, claimed_at=now, queued_at=now)
                s.add(row)
                s.flush()
            self._event(s, row, kind, detail, run_id)

    def tick_events(self, tick_id: int) -> list[TickEvent]:
        with self.read() as s:
            return list(s.exec(select(TickEvent).where(TickEvent.tick_id == tick_id).order_by(TickEvent.id)))

    def runs_of_tick(self, tick_id: int) -> list[str]:
        """Every run that ever claimed this tick, oldest first."""
        with self.read() as s:
            row = s.get(Tick, tick_id)
            ids = s.exec(select(TickEvent.run_id).where(TickEvent.tick_id == tick_id,
                                                        TickEvent.kind.in_(("claimed", "reclaimed")))
                         .order_by(TickEvent.id)).all()
        out = [r for r in ids if r]
        if row is not None and row.run_id and row.run_id not in out:
            out.insert(0, row.run_id)  # claimed before tick_events existed
        return out

    def renew_lease(self, tick_id: int, run_id: str, lease_s: float) -> bool:
        """Extend this run's claim on its tick to the ledger's now + ``lease_s``; False if the claim is no longer its."""
        params: dict[str, Any]
        if self.is_postgres:
            sql, params = "now() + make_interval(secs => :s)", {"s": float(lease_s)}
        else:
            sql, params = ":until", {"until": sqlite_text(utcnow() + timedelta(seconds=lease_s))}
        try:
            with self._lock, self.engine.connect() as conn:
                conn = conn.execution_options(ledger_write=True)
                with conn.begin():
                    done = conn.execute(text(f"UPDATE ticks SET lease_until = {sql} WHERE id = :id AND run_id = :r "
                                             "AND state = 'claimed'"), {**params, "id": tick_id, "r": run_id})
                    return bool(done.rowcount)
        except SQLAlchemyError as exc:
            raise LedgerError(f"lease of tick {tick_id} not renewed: {exc}") from None

    def settle_tick(self, tick_id: int, run_id: str, outcome: str) -> None:
        """A tick whose earlier attempt already did the work ends with that run as its outcome: done, not run again."""
        with self.write() as s:
            row = s.get(Tick, tick_id)
            row.state, row.run_id, row.outcome, row.lease_until = "done", run_id, outcome, None
            row.finished_at = self.clock(s)
            s.add(row)
            self._event(s, row, "settled", outcome, run_id)

    def resend_due(self, channels: list[str], lease_s: float, resend_after_s: float,
                   horizon: timedelta) -> list[tuple[str, datetime, str]]:
        """Ticks to send again: claimed with a lapsed lease (the worker died), or queued and unclaimed for
        ``resend_after_s`` (a broker lost it). Each is marked in the same transaction (lease or ``queued_at``
        moved on), so of several schedulers only one sends it, once per lease. Returns (channel, tick, why)."""
        out = []
        with self.write() as s:
            now = self.clock(s)
            rows = s.exec(select(Tick).where(Tick.state != "done", Tick.scheduled_for >= now - horizon,
                                             Tick.channel.in_(channels))).all()
            for row in rows:
                if row.state == "claimed" and row.lease_until is not None and row.lease_until < now:
                    why = (f"lease lapsed {(now - row.lease_until).total_seconds():.0f} s ago "
                           f"(run {row.run_id}, claimed by {row.claimed_by}): its worker died")
                    row.lease_until = now + timedelta(seconds=lease_s)
                elif row.state == "queued" and (row.queued_at or row.claimed_at) <= now - timedelta(seconds=resend_after_s):
                    why = f"not claimed {resend_after_s:.0f} s after it was queued"
                    row.queued_at = now
                else:
                    continue
                s.add(row)
                self._event(s, row, "requeued", why, row.run_id)
                out.append((row.channel, row.scheduled_for, why))
        return out

    def finish_run(self, run_id: str, status: str, exit_code: int, error: str | None = None) -> None:
        """Record the run's outcome; the tick it served (if any) is done with it."""
        with self.write() as s:
            run = s.get(Run, run_id)
            run.status, run.exit_code, run.error = status, exit_code, error
            run.finished_at = utcnow()
            s.add(run)
            for tick in s.exec(select(Tick).where(Tick.run_id == run_id, Tick.state == "claimed")):
                tick.state, tick.finished_at, tick.lease_until = "done", run.finished_at, None
                tick.outcome = f"run {run_id} {status} (exit {exit_code})"
                s.add(tick)
                self._event(s, tick, "finished", tick.outcome, run_id)

    def record_turns_after_done(self, run_id: str, turns: int) -> None:
        """Model turns the run made after done_when held and the report was recorded (the closing message)."""
        with self.write() as s:
            run = s.get(Run, run_id)
            run.turns_after_done = turns
            s.add(run)

    def tick_state(self, channel: str, tick: datetime) -> str | None:
        """``queued``, ``claimed``, ``done``, or None when no row exists for this firing."""
        with self.read() as s:
            row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
            return row.state if row else None

    def mark_crashed(self, channel: str) -> list[str]:
        """Runs of ``channel`` left "running" by a dead process become "crashed". Call holding the channel lock."""
        with self.write() as s:
            runs = s.exec(select(Run).where(Run.channel == channel, Run.status == RunStatus.RUNNING)).all()
            for run in runs:
                run.status, run.error, run.finished_at = "crashed", "the process died before the run ended", utcnow()
                s.add(run)
            return [r.id for r in runs]

    def get_run(self, run_id: str | None = None) -> Run | None:
        """A run by id, or the latest run when ``run_id`` is None."""
        with self.read() as s:
            if run_id:
                return s.get(Run, run_id)
            return s.exec(select(Run).order_by(Run.started_at.desc(), Run.id.desc()).limit(1)).first()

    def runs(self, limit: int = 20) -> list[Run]:
        with self.read() as s:
            return list(s.exec(select(Run).order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)))

    # --- provider capabilities (pipeline.model.probe) ----------------------------

    def capability(self, model: str, api_base: str) -> ProviderCapability | None:
        with self.read() as s:
            return s.get(ProviderCapability, (model, api_base))

    def record_capability(self, row: ProviderCapability) -> None:
        """Store a probe's answer for (model, api_base), replacing the previous one."""
        with self.write() as s:
            s.merge(row)

    # --- turns and executions ----------------------------------------------

    def add_turn(self, run_id: str, role: str, content: str | None, **extra: Any) -> Turn:
        """Record a message (deferred: it commits with the next write)."""
        with self._deferred_lock:
            if run_id not in self._seq:
                with self.read() as s:
                    # SQLModel types exec() for select() only; a text() clause runs as with execute().
                    self._seq[run_id] = s.exec(text("SELECT COALESCE(MAX(seq), 0) FROM turns WHERE run_id = :r")  # type: ignore[call-overload]
                                               .bindparams(r=run_id)).one()[0]
            self._seq[run_id] += 1
            turn = Turn(run_id=run_id, seq=self._seq[run_id], role=role, content=content, **extra)
        self.defer(turn)
        return turn

    def open_execution(self, run_id: str, turn: Turn | None, call_id: str | None, capability: str, arguments: str) -> Execution:
        """An execution about to run (``ok`` NULL: never a fact). Deferred: commits with the capability's first write."""
        ex = Execution(run_id=run_id, call_id=call_id, capability=capability, arguments_json=arguments)
        self.defer(ex, turn)
        return ex

    def close_execution(self, ex: Execution, ok: bool, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        """Settle an execution. Committed before returning: only then may the model hear of it."""
        ex.ok = ok
        ex.result_json = json.dumps(result, ensure_ascii=False) if result is not None else None
        ex.error = error
        ex.finished_at = utcnow()
        with self.write() as s:
            s.add(ex)

    def record_failed_call(self, run_id: str, turn: Turn | None, call_id: str | None, capability: str, arguments: str, error: str) -> None:
        """A call rejected before it ran (unknown tool, bad JSON, schema): never a fact."""
        now = utcnow()
        self.defer(Execution(run_id=run_id, call_id=call_id, capability=capability, arguments_json=arguments,
                             ok=False, error=error, started_at=now, finished_at=now), turn)

    def turns(self, run_id: str) -> list[Turn]:
        self.flush()
        with self.read() as s:
            return list(s.exec(select(Turn).where(Turn.run_id == run_id).order_by(Turn.seq)))

    def executions(self, run_id: str) -> list[Execution]:
        self.flush()
        with self.read() as s:
            return list(s.exec(select(Execution).where(Execution.run_id == run_id).order_by(Execution.id)))

    def model_calls(self, run_id: str) -> list[ModelCall]:
        """The model calls capabilities made in this run (``pipeline.model.calls``), oldest first."""
        self.flush()
        with self.read() as s:
            return list(s.exec(select(ModelCall).where(ModelCall.run_id == run_id).order_by(ModelCall.id)))

    # --- facts, claims, guard ---------------------------------------------

    def facts(self, run_id: str) -> list[Fact]:
        """Successful executions of this run, oldest first: the only facts there are."""
        out = []
        for ex in self.executions(run_id):
            if not ex.ok:
                continue
            out.append(fact_from_execution(ex.capability, ex.id, ex.result_json, ex.finished_at))
        return out

    def record_claims(self, run_id: str, turn: Turn | None, claims: list[dict[str, Any]]) -> None:
        if not claims:
            return
        with self.write() as s:
            for c in claims:
                s.add(Claim(run_id=run_id, turn_id=turn.id if turn else None, capability=c["capability"], text=c["text"],
                            value=None if c.get("value") is None else str(c["value"]), status=c["status"]))

    def claims(self, run_id: str) -> list[Claim]:
        with self.read() as s:
            return list(s.exec(select(Claim).where(Claim.run_id == run_id).order_by(Claim.id)))

    def record_guard_event(self, run_id: str, turn: Turn | None, kind: str, action: str, nudge_no: int, message: str) -> int:
        """Record a guard decision; a nudge also counts on the run. Returns the nudge number."""
        with self.write() as s:
            if action == "nudge":
                run = s.get(Run, run_id)
                run.nudges += 1
                nudge_no = run.nudges
                s.add(run)
            s.add(GuardEvent(run_id=run_id, turn_id=turn.id if turn else None, kind=kind, action=action,
                             nudge_no=nudge_no, message=message))
        return nudge_no

    def guard_events(self, run_id: str) -> list[GuardEvent]:
        with self.read() as s:
            return list(s.exec(select(GuardEvent).where(GuardEvent.run_id == run_id).order_by(GuardEvent.id)))

