"""One run at a time per channel, across processes: ``fcntl.flock`` on a file next to the ledger.

``pipeline run`` from cron and ``pipeline daemon`` take the same lock, so two
of them can never race to publish the same article. The lock is taken
without waiting: a run that finds it held gives up at once (exit 75,
EX_TEMPFAIL) instead of queueing behind a run that may take minutes. The
kernel drops a flock when its process dies, so a crashed run never leaves a
stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .config import Config
from .errors import ChannelLocked


def lock_path(cfg: Config, name: str) -> Path:
    url = cfg.ledger_url
    if url.startswith("sqlite:///") and ":memory:" not in url:
        ledger = Path(url[len("sqlite:///"):])
        return ledger.with_name(f"{ledger.name}.{name}.lock")
    return cfg.state_dir / f"{name}.lock"


@contextmanager
def hold(path: Path, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ChannelLocked(f"skipped: locked ({what} is held by pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def channel_lock(cfg: Config, channel: str):
    return hold(lock_path(cfg, channel), f"channel {channel}")
