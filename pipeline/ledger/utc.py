"""Time in the ledger: always UTC, always written with its offset.

SQLite has no time type, so there the ledger stores ISO 8601 text ending in ``+00:00``:
what datasette or the sqlite3 shell shows is unambiguous, and text order is time order.
PostgreSQL stores ``timestamptz``. This module is light (no SQLAlchemy) so the read
commands and the signal handler can use it.
"""

from __future__ import annotations

from datetime import datetime, timezone

# The text of a time in a SQLite ledger (microseconds always present, so every value has one width).
SQLITE_FORMAT = "%Y-%m-%dT%H:%M:%S.%f+00:00"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def aware(t: datetime) -> datetime:
    """``t`` in UTC; a naive value is taken to be UTC (what ledgers before revision 0012 stored)."""
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def sqlite_text(t: datetime) -> str:
    """``t`` as a SQLite ledger stores it, for raw SQL that writes or compares times."""
    return aware(t).strftime(SQLITE_FORMAT)
