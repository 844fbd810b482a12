"""Who schedules and who runs: the leading daemon (PostgreSQL ledger), the Celery workers seen, the queue depth.

``pipeline status`` asks this only when there is more than one machine to ask about; nothing is
imported until then (psycopg, Celery), so a local ``status`` stays a fast read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .status import EngineStatus

if TYPE_CHECKING:
    from .config import Config


def engine_status(cfg: Config) -> EngineStatus:
    """The leading daemon (PostgreSQL ledger) and, with Celery, the workers seen and the queue depth."""
    leader, postgres = None, cfg.ledger_url.startswith("postgres")
    if postgres:
        import psycopg

        from .locks import advisory_key, pg_conninfo

        key = advisory_key("scheduler")
        with psycopg.connect(pg_conninfo(cfg.ledger_url), autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT a.application_name, a.client_addr::text, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.objsubid = 1 AND l.classid = %s::oid AND l.objid = %s::oid",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
        leader = None if row is None else f"{row[0]} from {row[1] or 'local socket'}"
    if cfg.engine.kind != "celery":
        return EngineStatus(cfg.engine.kind, postgres, leader)
    from .celery_engine import make_app, queue_depth, workers_seen

    app = make_app(cfg)
    workers = None
    try:
        workers = workers_seen(app)
        depth = queue_depth(app, cfg.engine.queue)
    except Exception as exc:  # the broker is down: say so, don't fail status
        return EngineStatus(cfg.engine.kind, postgres, leader, workers, broker_error=f"{type(exc).__name__}: {exc}")
    return EngineStatus(cfg.engine.kind, postgres, leader, workers, depth)
