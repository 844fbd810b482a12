"""Who schedules and who runs: the leading daemon (PostgreSQL ledger), the Celery workers seen, the queue depth.

``pipeline status`` asks this only when there is more than one machine to ask about; nothing is
imported until then (psycopg, Celery), so a local ``status`` stays a fast read.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..views.status import EngineStatus

if TYPE_CHECKING:
    from ..config import EngineConfig


def engine_status(engine: EngineConfig, ledger_url: str) -> EngineStatus:
    """The leading daemon (PostgreSQL ledger) and, with Celery, the workers seen and the queue depth."""
    leader, leader_pid, postgres = None, None, ledger_url.startswith("postgres")
    if postgres:
        import psycopg

        from ..ledger.locks import advisory_key, pg_conninfo

        key = advisory_key("scheduler")
        try:
            conn = psycopg.connect(pg_conninfo(ledger_url), autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            from ..ledger.unreachable import unavailable

            raise unavailable(ledger_url, exc) from None
        with conn:
            row = conn.execute(
                "SELECT a.application_name, a.client_addr::text, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                # advisory locks are per database: another ledger's daemon on the same server is not ours
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.objsubid = 1 AND l.classid = %s::oid AND l.objid = %s::oid",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
        if row is not None:
            leader, leader_pid = _leader_text(row[0], row[1], row[2])
    if engine.kind != "celery":
        return EngineStatus(engine.kind, postgres, leader, leader_pid=leader_pid)
    from .celery_engine import broker_app, queue_depth, workers_seen

    app = broker_app(engine)
    workers = None
    try:
        workers = workers_seen(app)
        depth = queue_depth(app, engine.queue)
    except Exception as exc:  # the broker is down: say so, don't fail status
        return EngineStatus(engine.kind, postgres, leader, workers, broker_error=f"{type(exc).__name__}: {exc}",
                            leader_pid=leader_pid)
    return EngineStatus(engine.kind, postgres, leader, workers, depth, leader_pid=leader_pid)


def _leader_text(name: str, addr: str | None, since: datetime) -> tuple[str, int | None]:
    """"daemon pid 812 on host-a (10.0.0.5), leading since 2026-12-01 21:05:03 UTC", and the pid."""
    from ..ledger.locks import LEAD_PREFIX

    where = addr or "local socket"
    at = since.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if name.startswith(LEAD_PREFIX):  # "pipeline daemon pid N on HOST"
        pid = name[len(LEAD_PREFIX):].split(" ", 1)[0]
        return f"{name.removeprefix('pipeline ')} ({where}), leading since {at}", int(pid) if pid.isdigit() else None
    pid = name.rsplit(" pid ", 1)[-1]  # a daemon before host names: "pipeline the scheduler's lead pid N"
    return f"daemon pid {pid} ({where}), leading since {at}", int(pid) if pid.isdigit() else None
