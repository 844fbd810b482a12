"""The one retry policy: how many attempts, and how long to pause between them.

Exponential from ``base_s``, capped at ``cap_s``, with optional jitter (model providers rate-limit
callers in step; jitter spreads them). The pause goes through ``pipeline.runtime.deadline.sleep``, so a
stop request or an expiring deadline ends it at once. What is retried, and when a failure is
final, stays with each caller: a model call, an idempotent read and a create that may have
reached the platform are not retried the same way.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from . import deadline


@dataclass(frozen=True)
class Backoff:
    retries: int
    base_s: float
    cap_s: float = 10.0
    jitter: bool = False

    @property
    def attempts(self) -> int:
        return self.retries + 1

    def delay(self, attempt: int) -> float:
        """The pause after failed attempt number ``attempt`` (1-based)."""
        delay: float = min(self.base_s * 2 ** (attempt - 1), self.cap_s)
        return delay * (0.5 + random.random()) if self.jitter else delay

    def pause(self, attempt: int, sleep: Callable[[float], object] | None = None) -> float:
        """Sleep the pause after attempt ``attempt`` (``sleep``: a test's fake clock); returns it."""
        delay = self.delay(attempt)
        (sleep or deadline.sleep)(delay)
        return delay
