"""The ledger's schema version, and bringing a ledger to it.

Alembic owns the schema: ``versions/`` holds one revision per change, append-only.
Opening a ledger costs one query (``alembic_version`` against ``HEAD``); Alembic is
imported only when that query says a migration is due, so read commands stay fast.

A migration runs in one write transaction that also serialises the migrators:
``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on PostgreSQL.
Two processes opening an old ledger at once migrate it once; the second finds it
current when its turn comes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import LedgerError, LedgerVersionError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection, Engine

# The newest revision this code knows. A test checks it against versions/ (each fact once:
# that test fails if a revision is added without moving HEAD).
HEAD = "0020"
# What the 0.1.0 release created with create_all(): a ledger with its tables but no
# alembic_version row is stamped here, then upgraded.
BASELINE = "0001"
# pg_advisory_xact_lock key shared by every migrator of a PostgreSQL ledger ("ledger" in ASCII).
_PG_LOCK_KEY = 0x6C6564676572

SCRIPT_LOCATION = Path(__file__).parent
# The tables 0.1.0 created: a database holding them without alembic_version is a 0.1.0 ledger.
BASELINE_TABLES = ("runs", "turns", "executions", "topics", "articles", "publications",
                   "registrations", "reports", "claims", "guard_events")
# Every table the ledger owns today (schema checks ignore anything else in the database).
LEDGER_TABLES = (*BASELINE_TABLES, "ticks", "platform_tokens", "reviews", "tick_events", "provider_capabilities",
                 "model_calls", "daemons", "outlines", "sources", "topic_sources", "source_facts")


def stored_revision(conn: Connection) -> str | None:
    """The revision recorded in the ledger; None when it has no ``alembic_version`` table (new or 0.1.0)."""
    from sqlalchemy import inspect

    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def is_current(engine: Engine) -> bool:
    """The fast path: True when the ledger is at HEAD. One query, no Alembic import."""
    from sqlalchemy.exc import DBAPIError

    with engine.connect() as conn:
        try:
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == HEAD
        except DBAPIError:  # no such table: a new ledger or one made by 0.1.0
            return False


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", str(SCRIPT_LOCATION / "versions"))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


def known_revisions() -> list[str]:
    """Every revision in versions/, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


@contextmanager
def migration_transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction that holds the ledger's migration lock until it commits.

    SQLite checks foreign keys as batch mode copies tables, so they are switched off
    for the migration (a pragma cannot change inside a transaction) and checked as a
    whole before COMMIT, as SQLite's own procedure for ALTERs prescribes.
    """
    from sqlalchemy.exc import SQLAlchemyError

    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        # On the DBAPI connection, outside any transaction (pysqlite runs in autocommit here).
        raw = conn.connection.driver_connection if sqlite else None
        if raw is not None:
            raw.execute("PRAGMA foreign_keys = OFF")
        try:
            conn = conn.execution_options(ledger_write=True)  # BEGIN IMMEDIATE on SQLite
            with conn.begin():
                if engine.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
                yield conn
                if sqlite:
                    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise LedgerError(f"migration would break {len(broken)} foreign key(s), first: {broken[0]}; "
                                          "nothing was changed")
        except SQLAlchemyError as exc:
            raise LedgerError(f"schema migration failed, nothing was changed: {getattr(exc, 'orig', None) or exc}") from None
        finally:
            if raw is not None:
                raw.execute("PRAGMA foreign_keys = ON")


@dataclass(frozen=True)
class Migration:
    """What ``migrate`` did: the revision before and after (None: no schema)."""

    before: str | None
    after: str
    stamped_legacy: bool = False


def migrate(engine: Engine, target: str = "head", *, allow_downgrade: bool = False) -> Migration:
    """Bring the ledger to ``target`` (upgrade, or downgrade when allowed), under the migration lock.

    A ledger at a revision this code does not know was written by a newer program:
    it is refused (``LedgerVersionError``, exit 2) before anything is written.
    """
    from alembic import command

    known = known_revisions()
    wanted = known[-1] if target == "head" else target
    if wanted not in known and wanted != "base":
        raise LedgerVersionError(f"unknown schema revision {target!r}; this program knows {', '.join(known)}")
    with migration_transaction(engine) as conn:
        before = stored_revision(conn)
        if before is not None and before not in known:
            raise LedgerVersionError(_too_new(before, known))
        stamped = False
        if before is None and _has_legacy_tables(conn):
            command.stamp(alembic_config(conn), BASELINE)
            before, stamped = BASELINE, True
        if before == wanted:
            return Migration(before, wanted, stamped)
        cfg = alembic_config(conn)
        if wanted == "base" or (before is not None and known.index(wanted) < known.index(before)):
            if not allow_downgrade:
                raise LedgerVersionError(f"{target} is older than the ledger's {before}: a downgrade drops what later "
                                         "revisions added; pass --downgrade to do it")
            command.downgrade(cfg, wanted)
        else:
            command.upgrade(cfg, wanted)
        return Migration(before, wanted, stamped)


def ensure_current(engine: Engine) -> Migration | None:
    """Called at every ledger open: the fast path (None), else a migration to HEAD."""
    if is_current(engine):
        return None
    return migrate(engine)


def upgrade_sql(url: str, engine: Engine, target: str = "head") -> str:
    """The SQL that ``migrate`` would run from the ledger's current revision to ``target`` (offline mode)."""
    import io

    from alembic import command

    known = known_revisions()
    with engine.connect() as conn:
        before = stored_revision(conn)
        if before is None and _has_legacy_tables(conn):
            before = BASELINE
    if before is not None and before not in known:
        raise LedgerVersionError(_too_new(before, known))
    buf = io.StringIO()
    cfg = alembic_config(url=url)
    cfg.output_buffer = buf
    wanted = known[-1] if target == "head" else target
    if before and before != "base" and wanted != "base" and known.index(wanted) < known.index(before):
        command.downgrade(cfg, f"{before}:{wanted}", sql=True)
    else:
        command.upgrade(cfg, f"{before}:{wanted}" if before else wanted, sql=True)
    return buf.getvalue()


def _has_legacy_tables(conn: Connection) -> bool:
    from sqlalchemy import inspect

    present = set(inspect(conn).get_table_names())
    if not present & set(BASELINE_TABLES):
        return False
    missing = [t for t in BASELINE_TABLES if t not in present]
    if missing:
        raise LedgerError(f"the database has some ledger tables but not {', '.join(missing)}: not a ledger this program made")
    return True


def _too_new(revision: str, known: list[str]) -> str:
    return (f"the ledger is at schema revision {revision}, newer than this program knows (up to {known[-1]}): "
            "it was written by a newer pipeline; upgrade the program (the ledger was not touched)")


def new_revision(message: str) -> Path:
    """Write a revision autogenerated from the models' difference to HEAD (``make migration MESSAGE=…``)."""
    import tempfile

    from alembic import command
    from sqlalchemy import create_engine

    known = known_revisions()
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite:///{tmp}/ledger.db")
        migrate(engine)
        with engine.begin() as conn:
            script = command.revision(alembic_config(conn), message, autogenerate=True, rev_id=f"{len(known) + 1:04d}")
        engine.dispose()
    return Path(script.path)  # type: ignore[union-attr]
