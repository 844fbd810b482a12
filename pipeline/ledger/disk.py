"""A full disk: recognised as such, said in words, and survived long enough to record the run's end.

SQLite reports a full disk as "database or disk is full", or, with a few KiB
left, as a bare "disk I/O error"; files report ENOSPC or EDQUOT. Either way
the run must end as an *environment failure* (exit 7) with a row that says so,
but the final write needs space too. So each run first sets aside a small
reserve file next to the ledger; when a write fails for lack of space the
reserve is deleted, which frees exactly the room the run's final row needs.
The next run with space to spare makes the reserve again.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

RESERVE_BYTES = 1 << 20
NEARLY_FULL_BYTES = 1 << 20  # below this, an unexplained I/O error is taken for a full disk


def free_bytes(path: Path) -> int | None:
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def is_full(exc: BaseException, where: Path | None = None) -> bool:
    """Whether ``exc`` (an OSError, or an SQLite error) means there is no space left at ``where``."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    if "database or disk is full" in text:
        return True
    if "disk i/o error" in text and where is not None:
        free = free_bytes(where)
        return free is not None and free < NEARLY_FULL_BYTES
    return False


def describe(where: Path) -> str:
    free = free_bytes(where)
    left = f"{free // 1024} KiB free" if free is not None else "free space unknown"
    return f"disk full: {left} on the file system of {where}"


def reserve_path(ledger_file: Path) -> Path:
    return ledger_file.with_name(f".{ledger_file.name}.reserve")


def reserve(ledger_file: Path) -> None:
    """Set aside RESERVE_BYTES next to the ledger, if not there already (best effort)."""
    path = reserve_path(ledger_file)
    try:
        if path.exists() and path.stat().st_size >= RESERVE_BYTES:
            return
        with open(path, "wb") as fh:
            fh.write(b"\0" * RESERVE_BYTES)  # real blocks: a sparse file would free nothing
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        try:
            path.unlink()  # a partial reserve only takes space a run may need
        except OSError:
            pass


def release(ledger_file: Path) -> bool:
    """Delete the reserve; True when there was one to free."""
    try:
        reserve_path(ledger_file).unlink()
    except OSError:
        return False
    log.warning("disk full: released the reserve next to %s to record the run's end", ledger_file)
    return True
