"""Total deadlines and prompt stops for calls that can hang.

A socket timeout bounds each *read*, so a server that trickles one byte every
few seconds never trips it, and a blocked read does not notice SIGTERM. Here a
call that can hang (a model call, a platform request, a feed fetch) runs on a
helper thread while the caller waits in short slices, checking two things:

* the nearest deadline on this context's stack (``limit``): a model call's
  ``[llm] call_deadline_s``, a step's ``[agent] step_deadline_s``, the run's
  ``[agent] run_deadline_s``; the first to pass raises ``DeadlineExceeded``
  naming it;
* a stop request (``pipeline.runtime.shutdown``): raises ``RunInterrupted`` at once.

The abandoned helper thread is a daemon thread still blocked in its read: it
holds nothing of the run's (no ledger session, no lock) and ends with its
socket timeout or the process. Deadlines live in a ``ContextVar``, so each of
the daemon's run threads has its own.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from ..errors import DeadlineExceeded, RunInterrupted
from . import shutdown

T = TypeVar("T")
POLL_S = 0.05  # how often a waiting caller looks at the clock and the stop flag

_stack: contextvars.ContextVar[tuple[tuple[float, str, float], ...]] = contextvars.ContextVar("deadlines", default=())


@contextmanager
def limit(seconds: float | None, what: str) -> Iterator[None]:
    """Everything inside must finish within ``seconds`` (None or 0: no limit of its own)."""
    if not seconds:
        yield
        return
    token = _stack.set((*_stack.get(), (time.monotonic() + seconds, what, seconds)))
    try:
        yield
    finally:
        _stack.reset(token)


def nearest() -> tuple[float, str, float] | None:
    """(monotonic time, name, length) of the deadline that passes first, or None."""
    stack = _stack.get()
    return min(stack) if stack else None


def remaining() -> float | None:
    """Seconds until the nearest deadline (never negative), or None without one."""
    first = nearest()
    return None if first is None else max(0.0, first[0] - time.monotonic())


def check(interruptible: bool = True) -> None:
    """Raise if a stop was requested or a deadline has passed."""
    if interruptible and shutdown.requested():
        raise RunInterrupted("stop requested; the call in progress was abandoned")
    first = nearest()
    if first is not None and time.monotonic() >= first[0]:
        raise DeadlineExceeded(first[1], first[2])


def call(fn: Callable[..., T], *args: Any, interruptible: bool = True, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, abandoned when a deadline passes or (if ``interruptible``) a stop is requested."""
    check(interruptible)
    if nearest() is None and not interruptible:
        return fn(*args, **kwargs)
    box: dict[str, object] = {}
    done = threading.Event()
    ctx = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = ctx.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the caller as is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name=f"deadline:{getattr(fn, '__name__', 'call')}").start()
    while not done.wait(POLL_S):
        check(interruptible)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def sleep(seconds: float) -> None:
    """A backoff pause that ends early, raising, on a stop request or a deadline."""
    end = time.monotonic() + seconds
    while True:
        check()
        left = end - time.monotonic()
        if left <= 0:
            return
        shutdown.wait(min(left, POLL_S * 4))


def http(fn: Callable[..., T], *args: Any, total_s: float, interruptible: bool = True, **kwargs: Any) -> T:
    """An HTTP call bounded in *total* by ``total_s`` (httpx's timeout bounds each read only).

    Past ``total_s`` it raises ``httpx.ReadTimeout``, so callers treat it as the timeout it is
    (a create that may have reached the platform, a feed that did not answer); a step's or the
    run's deadline, or a stop request, propagate as themselves.
    """
    import httpx

    what = f"HTTP request ({getattr(fn, '__name__', 'call')})"
    try:
        with limit(total_s, what):
            return call(fn, *args, interruptible=interruptible, **kwargs)
    except DeadlineExceeded as exc:
        if exc.what != what:
            raise
        raise httpx.ReadTimeout(f"no complete answer within {total_s:g} s") from None
