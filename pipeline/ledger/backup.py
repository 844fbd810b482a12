"""``pipeline ledger backup DEST``: a consistent copy of a SQLite ledger while runs are writing.

SQLite's online backup API, in one step: the copy is the database as of one committed
transaction (it reads under a read transaction, so writers carry on; none is half in it).
The copy is written beside DEST and renamed into place, switched out of WAL mode (one
self-contained file: ``?immutable=1``, ``datasette -i`` and a plain ``cp`` see all of it) and
checked with ``PRAGMA integrity_check``. A PostgreSQL ledger is backed up with ``pg_dump``.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, LedgerError
from .reader import sqlite_path


@dataclass(frozen=True)
class Backup:
    path: Path
    bytes: int
    runs: int


def backup(url: str, dest: Path) -> Backup:
    """Copy the ledger at ``url`` to ``dest`` (which must not exist). Raises ConfigError / LedgerError (exit 2)."""
    if url.startswith("postgres"):
        raise ConfigError("a PostgreSQL ledger is backed up with pg_dump (pg_dump -Fc DBNAME > ledger.dump; "
                          "restore with pg_restore): see README, Backup and restore")
    src_path = sqlite_path(url)
    if src_path is None:
        raise ConfigError(f"ledger {url}: only a SQLite file ledger can be backed up this way")
    if not src_path.exists():
        raise LedgerError(f"no ledger at {src_path}: nothing has run with this config yet")
    if dest.exists() or dest.is_symlink():
        raise ConfigError(f"{dest} exists: a backup never overwrites a file (choose a new name)")
    if not dest.parent.is_dir():
        raise ConfigError(f"{dest.parent} is not a directory")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        src = sqlite3.connect(f"{src_path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)  # pages=-1: the whole database in one step, one consistent snapshot
                dst.execute("PRAGMA journal_mode = DELETE")  # a single file, nothing in a -wal beside it
                check = dst.execute("PRAGMA integrity_check").fetchone()[0]
                runs = dst.execute("SELECT count(*) FROM runs").fetchone()[0]
            finally:
                dst.close()
        finally:
            src.close()
        if check != "ok":
            raise LedgerError(f"backup of {src_path} failed its integrity check: {check}")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        raise LedgerError(f"backup of {src_path} to {dest} failed: {exc}") from None
    except OSError as exc:
        raise LedgerError(f"backup to {dest} failed: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return Backup(dest, dest.stat().st_size, runs)


def readonly_engine(path: Path):  # type: ignore[no-untyped-def]
    """An SQLAlchemy engine on a ledger *file* (a backup) that cannot change it: no WAL switch, no migration."""
    from sqlalchemy import create_engine

    if not path.is_file():
        raise LedgerError(f"no ledger file at {path}")
    return create_engine(f"sqlite:///file:{path.resolve()}?mode=ro&uri=true")
