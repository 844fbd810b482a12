"""Stopping: the first SIGTERM/SIGINT stops runs promptly; the second exits now.

Runs check ``requested()`` before each model turn, and a call that can hang
(a model call, a platform request: ``pipeline.runtime.deadline.call``) is abandoned
within a fraction of a second of the request. Ledger writes are never cut:
a publish whose platform call was abandoned leaves its row ``pending`` with
"outcome unknown", for recovery to settle. The run is then recorded as
``interrupted`` (exit 130). On a second signal the process exits at once:
SQLite transactions are atomic, so the ledger holds either the whole step or
none of it, and ``on_force`` gets a moment to mark running runs interrupted.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger(__name__)

_stop = threading.Event()
FORCE_GRACE_S = 2.0  # how long on_force may take after a second signal


def requested() -> bool:
    return _stop.is_set()


def reset() -> None:
    _stop.clear()


def wait(timeout: float) -> bool:
    """Sleep up to ``timeout`` seconds, waking early on a stop request; True if one was made."""
    return _stop.wait(timeout)


def install(on_first: Callable[[], None] | None = None, on_force: Callable[[], None] | None = None,
            force_exit_code: int = 130) -> None:
    """Install handlers for SIGTERM and SIGINT (main thread only)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        if _stop.is_set():
            log.error("second %s: exiting now", signal.Signals(signum).name)
            # on_force runs on top of whatever the main thread was doing, which may hold a lock it
            # needs; whatever happens, the process is gone FORCE_GRACE_S from now.
            backstop = threading.Timer(FORCE_GRACE_S, os._exit, args=(force_exit_code,))
            backstop.daemon = True
            backstop.start()
            try:
                if on_force:
                    on_force()
            finally:
                os._exit(force_exit_code)
        log.warning("%s: abandoning the call in progress and stopping (send again to exit now)",
                    signal.Signals(signum).name)
        _stop.set()
        if on_first:
            on_first()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
