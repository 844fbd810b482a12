"""Read-only ledger access for the read commands (``ledger diff/show/runs``, ``stats``, ``status``, ``report``, ``claims check --run``).

Plain DB-API instead of SQLAlchemy: importing SQLAlchemy and the SQLModel
tables costs more than the half second a read command may take to start, and
reading needs none of the writer's machinery. SQLite is opened with
``mode=ro``, so looking at a ledger can neither create nor change one; a
missing ledger file is an error, not an empty table. PostgreSQL goes
through psycopg (the ``postgres`` extra). Writes stay in ``pipeline.ledger.writer``.

Rows come back as ``SimpleNamespace`` with the columns as attributes, the
same names the SQLModel tables use, timestamps as UTC-aware datetimes.
``EngineReader`` runs the same queries over an open ``Ledger``'s engine, so a
read model (``pipeline.views.reports``, ``pipeline.views.status``) is written once, in SQL,
for both a read command and a run in progress.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..errors import LedgerError
from .facts import Fact, fact_from_execution
from .utc import aware, sqlite_text

_BOOL_COLUMNS = {"ok", "guard_enabled"}


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite ledger URL (None for other databases and in-memory ones)."""
    if url.startswith("sqlite:///") and ":memory:" not in url:
        return Path(url[len("sqlite:///"):])
    return None


def _utc(value: Any) -> Any:
    # SQLite gives the stored ISO text; PostgreSQL a timestamptz in the session's zone. Both become aware UTC.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return aware(value) if isinstance(value, datetime) else value


def _row(data: dict[str, Any]) -> SimpleNamespace:
    for key, value in data.items():
        if value is None:
            continue
        if key.endswith("_at"):
            data[key] = _utc(value)
        elif key in _BOOL_COLUMNS:
            data[key] = bool(value)
    return SimpleNamespace(**data)


class _Reads:
    """The Ledger's read methods, same names and shapes, over ``_execute``."""

    is_sqlite: bool

    def _execute(self, sql: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise NotImplementedError

    def rows(self, sql: str, **params: Any) -> list[SimpleNamespace]:
        """Run a SELECT written with ``:name`` parameters."""
        names, rows = self._execute(sql, params)
        return [_row(dict(zip(names, r, strict=True))) for r in rows]

    def tuples(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        """Raw result rows, unconverted (for bulk numbers)."""
        return self._execute(sql, params)[1]

    def scalar(self, sql: str, **params: Any) -> Any:
        found = self._execute(sql, params)[1]
        return found[0][0] if found else None

    def time_param(self, t: datetime) -> Any:
        """A time as the ledger stores it (on SQLite its text, so comparisons order right)."""
        return sqlite_text(t) if self.is_sqlite else aware(t)

    def get_run(self, run_id: str | None = None) -> SimpleNamespace | None:
        if run_id:
            found = self.rows("SELECT * FROM runs WHERE id = :id", id=run_id)
        else:
            found = self.rows("SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT 1")
        return found[0] if found else None

    def runs(self, limit: int = 20) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT :n", n=limit)

    def turns(self, run_id: str) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM turns WHERE run_id = :r ORDER BY seq", r=run_id)

    def executions(self, run_id: str) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM executions WHERE run_id = :r ORDER BY id", r=run_id)

    def model_calls(self, run_id: str) -> list[SimpleNamespace]:
        """Capabilities' own model calls (``pipeline.model.calls``); none in a ledger from before revision 0016."""
        if not self.has_table("model_calls"):
            return []  # read as it is, not migrated
        return self.rows("SELECT * FROM model_calls WHERE run_id = :r ORDER BY id", r=run_id)

    def has_table(self, name: str) -> bool:
        """Whether the ledger has this table (a read command reads an older ledger without migrating it)."""
        if self.is_sqlite:
            return bool(self.scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = :n", n=name))
        return self.scalar("SELECT to_regclass(:n) IS NOT NULL", n=name) is True

    def facts(self, run_id: str) -> list[Fact]:
        return [fact_from_execution(ex.capability, ex.id, ex.result_json, ex.finished_at)
                for ex in self.executions(run_id) if ex.ok]

    def claims(self, run_id: str) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM claims WHERE run_id = :r ORDER BY id", r=run_id)

    def article(self, article_id: int) -> SimpleNamespace | None:
        found = self.rows("SELECT * FROM articles WHERE id = :id", id=article_id)
        return found[0] if found else None

    def articles(self, run_id: str) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM articles WHERE run_id = :r ORDER BY id", r=run_id)

    def guard_events(self, run_id: str) -> list[SimpleNamespace]:
        return self.rows("SELECT * FROM guard_events WHERE run_id = :r ORDER BY id", r=run_id)

    def facts_by_run(self, run_ids: list[str]) -> dict[str, list[str]]:
        """Capabilities that succeeded, per run, in one query."""
        if not run_ids:
            return {}
        marks = ", ".join(f":r{i}" for i in range(len(run_ids)))
        out: dict[str, list[str]] = {r: [] for r in run_ids}
        for row in self.rows(f"SELECT DISTINCT run_id, capability FROM executions WHERE ok = :ok AND run_id IN ({marks})",
                             ok=True, **{f"r{i}": r for i, r in enumerate(run_ids)}):
            out[row.run_id].append(row.capability)
        return {r: sorted(caps) for r, caps in out.items()}


class EngineReader(_Reads):
    """The reads over an open Ledger's SQLAlchemy engine (a run in progress, tests): same SQL, same rows."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"

    def _execute(self, sql: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            result = conn.execute(text(sql), params)
            return list(result.keys()), [tuple(r) for r in result]

    def close(self) -> None:
        pass  # the engine belongs to its Ledger


def reader_for(source: Any) -> _Reads:
    """A reader for ``source``: a LedgerReader/EngineReader as it is, a Ledger through its engine."""
    return source if isinstance(source, _Reads) else EngineReader(source.engine)


class LedgerReader(_Reads):
    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Any  # a sqlite3 or a psycopg connection
        self.is_sqlite = url.startswith("sqlite")
        path = sqlite_path(url)
        if self.is_sqlite:
            if path is None:
                raise LedgerError(f"ledger {url}: an in-memory ledger cannot be read by another process")
            if not path.exists():
                raise LedgerError(f"no ledger at {path}: nothing has run with this config yet")
            import sqlite3

            try:
                self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
                self.conn.execute("PRAGMA query_only = ON")
            except sqlite3.Error as exc:
                from .unreachable import unavailable

                raise unavailable(url, exc) from None
            self._errors: tuple[type[Exception], ...] = (sqlite3.Error,)
        elif url.startswith("postgresql"):
            try:
                import psycopg
                from psycopg.rows import dict_row
            except ImportError:
                raise LedgerError("a PostgreSQL ledger needs the postgres extra: pip install 'pipeline[postgres]'") from None
            try:
                self.conn = psycopg.connect(re.sub(r"^postgresql\+\w+://", "postgresql://", url), row_factory=dict_row)
                self.conn.read_only = True
            except psycopg.Error as exc:
                from .unreachable import unavailable

                raise unavailable(url, exc) from None  # the password hidden, the server's reason kept
            self._errors = (psycopg.Error,)
        else:
            raise LedgerError(f"ledger {url.split(':', 1)[0]}: the read commands support SQLite and PostgreSQL")
        self._check_revision()

    def _check_revision(self) -> None:
        """Refuse a ledger migrated by a newer program, as the writer does (reading is not migrating)."""
        from ..errors import LedgerVersionError
        from .migrations import SCRIPT_LOCATION, _too_new

        try:
            _names, found = self._execute("SELECT version_num FROM alembic_version", {})
        except LedgerError:
            if not self.is_sqlite:
                self.conn.rollback()  # the failed statement aborted the transaction
            return  # no alembic_version: a 0.1.0 ledger, which these queries read as it is
        # Revision ids are the file names' prefixes (0001_baseline.py): no Alembic import needed.
        known = sorted(f.name.split("_", 1)[0] for f in (SCRIPT_LOCATION / "versions").glob("[0-9]*_*.py"))
        if found and found[0][0] not in known:
            raise LedgerVersionError(_too_new(found[0][0], known))

    def _execute(self, sql: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            if self.is_sqlite:
                cur = self.conn.execute(sql, params)
                return [d[0] for d in cur.description], cur.fetchall()
            with self.conn.cursor() as cur:
                cur.execute(re.sub(r"(?<!:):(\w+)", r"%(\1)s", sql), params)
                names = [d.name for d in cur.description]
                return names, [tuple(r[n] for n in names) for r in cur.fetchall()]
        except self._errors as exc:
            if "no such table" in str(exc) or "does not exist" in str(exc):
                raise LedgerError(f"{self.url.split('@')[-1]}: not a pipeline ledger ({exc})") from None
            raise LedgerError(f"ledger read failed: {exc}") from None

    def close(self) -> None:
        self.conn.close()

