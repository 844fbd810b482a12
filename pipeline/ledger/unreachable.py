"""One line for a ledger that cannot be reached or opened, the same from every command.

The writer (SQLAlchemy), the read commands (sqlite3/psycopg) and the channel lock (psycopg, a lock
file) each meet an unreachable ledger in their own driver's words; this turns any of them into a
``LedgerUnavailable`` (exit 2) whose message names the ledger (its password hidden) and the driver's
reason on one line: ``ledger postgresql+psycopg://x@127.0.0.1:1/db: cannot connect: connection to
server at "127.0.0.1", port 1 failed: Connection refused``. No SQLAlchemy import: the read commands
use it too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from ..errors import LedgerUnavailable


def safe_url(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    try:
        split = urlsplit(url)
    except ValueError:
        return url
    if not split.password:
        return url
    netloc = split.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(split._replace(netloc=f"{user}:***@{netloc[1]}"))


def reason(exc: BaseException) -> str:
    """The driver's reason in one line: SQLAlchemy's wrapper and its "(Background on this error …)" dropped,
    psycopg's "Is the server running…?" hint dropped, an OSError as its strerror and file name."""
    orig = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's exception
    if isinstance(orig, BaseException):
        exc = orig
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = re.sub(r"^\([\w.]+\)\s*", "", text)  # "(psycopg.OperationalError) connection failed: …"
    return re.sub(r"^connection failed:\s*", "", text) or type(exc).__name__


def unavailable(url: str, exc: BaseException, doing: str = "cannot connect") -> LedgerUnavailable:
    """The error for ledger ``url`` that ``exc`` made unusable: raise it ``from None``."""
    what = "cannot open" if url.startswith("sqlite") and doing == "cannot connect" else doing
    return LedgerUnavailable(f"ledger {safe_url(url)}: {what}: {reason(exc)}")
