"""Graceful stop: the first SIGTERM/SIGINT asks runs to stop between steps; the second exits now.

Runs check ``requested()`` before each model turn, so a step in progress
(a publish, a registration) always finishes and is committed; the run is then
recorded as ``interrupted``. On a second signal the process exits at once:
SQLite transactions are atomic, so the ledger holds either the whole step or
none of it, and ``on_force`` gets a moment to mark running runs interrupted.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_stop = threading.Event()


def requested() -> bool:
    return _stop.is_set()


def request() -> None:
    _stop.set()


def reset() -> None:
    _stop.clear()


def install(on_first: Callable[[], None] | None = None, on_force: Callable[[], None] | None = None,
            force_exit_code: int = 130) -> None:
    """Install handlers for SIGTERM and SIGINT (main thread only)."""

    def handler(signum, _frame) -> None:
        if _stop.is_set():
            log.error("second %s: exiting now", signal.Signals(signum).name)
            try:
                if on_force:
                    on_force()
            finally:
                os._exit(force_exit_code)
        log.warning("%s: finishing the step in progress, then stopping (send again to exit now)",
                    signal.Signals(signum).name)
        _stop.set()
        if on_first:
            on_first()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
