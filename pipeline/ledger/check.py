"""``pipeline ledger check``: is the ledger sound, and at which schema revision?

Read-only. SQLite: ``PRAGMA integrity_check`` and ``foreign_key_check``. PostgreSQL
has no single equivalent: every ledger table is read in full (a damaged page fails
the read), and each index is verified with ``amcheck``'s ``bt_index_check`` where
that extension is installed. On both, the schema is compared with the models, so a
ledger altered by hand (or a model changed without a revision) shows up as drift, and
ticks that were queued or claimed but never reached an outcome are listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from . import migrations
from .utc import aware


@dataclass
class LedgerHealth:
    backend: str
    revision: str | None  # what the ledger records; None: not versioned (new, or made by 0.1.0)
    head: str  # what this program would migrate it to
    schema: str  # current | behind | ahead | unversioned | empty
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        # A ledger behind this program is sound: the next open migrates it.
        return not self.problems and self.schema != "ahead"

    def as_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "revision": self.revision, "head": self.head, "schema": self.schema,
                "ok": self.ok, "problems": self.problems, "notes": self.notes}


def check(engine: Engine) -> LedgerHealth:
    known = migrations.known_revisions()
    with engine.connect() as conn:
        revision = migrations.stored_revision(conn)
        tables = set(inspect(conn).get_table_names()) & set(migrations.LEDGER_TABLES)
        if revision is None:
            schema = "unversioned" if tables else "empty"
        elif revision not in known:
            schema = "ahead"
        else:
            schema = "current" if revision == known[-1] else "behind"
        health = LedgerHealth(engine.dialect.name, revision, known[-1], schema)
        if schema == "ahead":
            health.problems.append(f"schema revision {revision} is newer than this program knows ({known[-1]})")
            return health
        if engine.dialect.name == "sqlite":
            _sqlite_integrity(conn, health)
        elif engine.dialect.name == "postgresql":
            _postgres_integrity(conn, health, sorted(tables))
        if schema == "current":
            health.problems += _drift(conn)
            health.problems += ticks_without_outcome(conn)
        elif schema in ("behind", "unversioned"):
            health.notes.append("the next open (or `pipeline ledger migrate`) migrates it to " + known[-1])
    return health


def _sqlite_integrity(conn: Connection, health: LedgerHealth) -> None:
    result = [row[0] for row in conn.exec_driver_sql("PRAGMA integrity_check").fetchall()]
    if result != ["ok"]:
        health.problems += [f"integrity_check: {line}" for line in result]
    for table, rowid, parent, _fk in conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall():
        health.problems.append(f"foreign key: {table} row {rowid} points at a missing {parent} row")
    health.notes.append("PRAGMA integrity_check: ok" if result == ["ok"] else "PRAGMA integrity_check: FAILED")


def _postgres_integrity(conn: Connection, health: LedgerHealth, tables: list[str]) -> None:
    from sqlalchemy.exc import DBAPIError

    for table in tables:
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f'SELECT count(*) FROM "{table}"').scalar()
        except DBAPIError as exc:
            health.problems.append(f"{table}: cannot be read in full: {exc.orig}")
    has_amcheck = conn.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'").scalar()
    if not has_amcheck:
        health.notes.append(f"read every row of {len(tables)} tables; indexes not verified (CREATE EXTENSION amcheck to verify them)")
        return
    indexes = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
        "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND t.relname = ANY(%(tables)s)",
        {"tables": tables}).scalars().all()
    for index in indexes:
        try:
            with conn.begin_nested():
                conn.exec_driver_sql(f"SELECT bt_index_check('\"{index}\"'::regclass)")
        except DBAPIError as exc:
            health.problems.append(f"index {index}: {exc.orig}")
    health.notes.append(f"read every row of {len(tables)} tables; amcheck verified {len(indexes)} indexes")


# A tick not done whose last sign of life (lease, queueing, claim) is older than this has no outcome:
# its claimer is gone and no re-queue settled it (the daemon re-queues only the last day's ticks).
STALE_TICK = timedelta(hours=1)


def ticks_without_outcome(conn: Connection, now: datetime | None = None) -> list[str]:
    """Ticks that were queued or claimed and never reached an outcome, one line each (newest first, at most 20)."""
    now = now or datetime.now(timezone.utc)
    rows = conn.execute(text(
        "SELECT t.channel, t.scheduled_for, t.state, t.run_id, r.status, t.lease_until, t.queued_at, t.claimed_at "
        "FROM ticks t LEFT JOIN runs r ON r.id = t.run_id WHERE t.state <> 'done' "
        "ORDER BY t.scheduled_for DESC")).all()
    out = []
    for channel, tick, state, run_id, run_status, *times in rows:
        seen = max(aware(v if not isinstance(v, str) else datetime.fromisoformat(v)) for v in times if v is not None)
        if now - seen < STALE_TICK:
            continue
        tick_at = aware(tick if not isinstance(tick, str) else datetime.fromisoformat(tick)).isoformat()
        what = (f"claimed by run {run_id} ({run_status})" if state == "claimed" else "queued, never claimed")
        out.append(f"tick {channel}@{tick_at} has no outcome: {what}, last seen {seen.isoformat()}")
    return out[:20] + ([f"… and {len(out) - 20} more ticks without an outcome"] if len(out) > 20 else [])


def _drift(conn: Connection) -> list[str]:
    """Differences between the ledger's schema and the models (empty when they agree)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlmodel import SQLModel

    from . import models  # noqa: F401  (the tables register themselves on SQLModel.metadata)

    context = MigrationContext.configure(conn, opts={
        "compare_type": True,
        "include_name": lambda name, type_, _parents: type_ != "table" or name in migrations.LEDGER_TABLES})
    return [f"schema drift: {diff}" for diff in compare_metadata(context, SQLModel.metadata)]
