"""One run at a time per channel: ``fcntl.flock`` next to a SQLite ledger, a PostgreSQL advisory lock otherwise.

``pipeline run`` from cron and ``pipeline daemon`` take the same lock, so two
of them can never race to publish the same article. The lock is taken
without waiting: a run that finds it held gives up at once (exit 75,
EX_TEMPFAIL) instead of queueing behind a run that may take minutes. The
kernel drops a flock when its process dies, so a crashed run never leaves a
stale lock behind.

With a PostgreSQL ledger the runs of a channel may start on different hosts, so
the lock is a session-level advisory lock on the ledger's server, held on a
connection of its own for the whole run; the server drops it when that
connection ends, which a dead process's does.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ChannelLocked, ConfigError


def lock_path(ledger_url: str, state_dir: Path, name: str) -> Path:
    """The lock file ``name``: next to a SQLite ledger's file, else in ``state_dir``."""
    url = ledger_url
    if url.startswith("sqlite:///") and ":memory:" not in url:
        ledger = Path(url[len("sqlite:///"):])
        return ledger.with_name(f"{ledger.name}.{name}.lock")
    return state_dir / f"{name}.lock"


@contextmanager
def hold(path: Path, what: str, *, ledger_url: str | None = None) -> Iterator[None]:
    """Hold the flock on ``path``; a path that cannot hold one is ConfigError (exit 2), or with
    ``ledger_url`` (the lock beside that ledger) LedgerUnavailable: one line, no traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if ledger_url is not None:
            from .unreachable import unavailable

            raise unavailable(ledger_url, exc, f"cannot create the lock of {what} beside it") from None
        raise ConfigError(f"{path}: cannot create the lock of {what}: {exc.strerror or exc}") from None
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


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_lock`` (Python's hash() differs between processes)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(f"pipeline:{name}".encode(), digest_size=8).digest(), "big", signed=True)


def pg_conninfo(url: str) -> str:
    """A libpq connection string for a ``postgresql+psycopg://`` SQLAlchemy URL."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


LEAD_PREFIX = "pipeline daemon pid "


def lead_label() -> str:
    """The leading daemon's session name, which ``pipeline status`` reads from any host: pid and host name."""
    import socket

    return f"{LEAD_PREFIX}{os.getpid()} on {socket.gethostname()}"


# The lock session of the channel this thread is running, watched while the run goes on.
_held = threading.local()
WATCH_INTERVAL_S = 2.0


class _Lease:
    lost: str | None = None


def lost_lock() -> str | None:
    """Why this thread's channel lock is gone (its session died), or None while it holds."""
    lease = getattr(_held, "lease", None)
    return lease.lost if lease else None


def _watch(conn: Any, stop: threading.Event, owner: _Lease, what: str) -> None:
    # A lock session killed under a run (server restart, pg_terminate_backend) frees the channel
    # for another host: the run must notice and stop at its next step instead of running alongside.
    while not stop.wait(WATCH_INTERVAL_S):
        try:
            conn.execute("SELECT 1")
        except Exception as exc:  # any failure: the session, and so the lock, may be gone
            owner.lost = f"the session holding {what} ended: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            return


@contextmanager
def pg_hold(url: str, name: str, what: str, *, wait: bool = False, watch: bool = False,
            label: str | None = None) -> Iterator[Any]:
    """Hold advisory lock ``name`` on the server at ``url`` on a dedicated session; yields that connection.

    ``wait=False``: raise ChannelLocked at once if another session holds it.
    ``watch``: check the session every few seconds; ``lost_lock()`` says when it died.
    ``label``: the session's application_name (what others see of the holder), default "pipeline WHAT pid N".
    """
    import psycopg

    key = advisory_key(name)
    try:
        conn = psycopg.connect(pg_conninfo(url), autocommit=True, connect_timeout=10,
                               application_name=(label or f"pipeline {what} pid {os.getpid()}")[:63])
    except psycopg.OperationalError as exc:  # the server is down or refuses us: one line, exit 2
        from .unreachable import unavailable

        raise unavailable(url, exc) from None
    try:
        if wait:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        elif not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:  # type: ignore[index]  # always one row
            holder = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = %s::oid AND l.objid = %s::oid "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",  # locks are per database
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
            raise ChannelLocked(f"skipped: locked ({what} is held by {holder[0] if holder else 'another session'})")
        if not watch:
            yield conn
            return
        stop, lease = threading.Event(), _Lease()
        _held.lease = lease
        watcher = threading.Thread(target=_watch, args=(conn, stop, lease, what), daemon=True, name=f"watch {what}")
        watcher.start()
        try:
            yield conn
        finally:
            stop.set()
            watcher.join()
            _held.lease = None
    finally:
        conn.close()  # the session ends: the server releases the lock


@contextmanager
def channel_lock(ledger_url: str, state_dir: Path, channel: str) -> Iterator[None]:
    """Hold ``channel``'s lock: on the ledger's server for PostgreSQL, else a file (``lock_path``)."""
    if ledger_url.startswith("postgres"):
        with pg_hold(ledger_url, f"channel:{channel}", f"channel {channel}", watch=True):
            yield
    else:
        with hold(lock_path(ledger_url, state_dir, channel), f"channel {channel}", ledger_url=ledger_url):
            yield
