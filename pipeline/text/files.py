"""Files written whole or not at all: the site's pages and records, and the reports."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write ``path`` whole or not at all; safe with any number of threads and processes writing at once.

    A unique temporary name in the same directory (two writers never share one), fsynced, then renamed
    over the target: a crash leaves the old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600; pages and reports are for readers
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
