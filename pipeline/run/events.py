"""What a run reports while it works: a typed observer, one method per event, each a no-op by default.

The terminal's progress lines (``pipeline run``), the daemon's bookkeeping and tests subclass
``RunObserver`` and override what they need. An observer only watches: the ledger is written
before each event is reported, and nothing an observer does changes the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..tools.claims import ClaimFound


@dataclass(frozen=True)
class Nudge:
    """The guard sent the model a correction (``kind``: a GuardKind), the ``n``-th of at most ``limit``."""

    kind: str
    n: int
    limit: int
    hallucinations: tuple[ClaimFound, ...] = ()
    missing: tuple[str, ...] = ()


class RunObserver:
    def started(self, run_id: str, model: str, channel: str) -> None:
        """The run's row is written; the agent is about to start."""

    def turn(self, text: str, calls: list[str], latency_ms: float) -> None:
        """The model answered: ``text`` and the names of the tools it called (none: a final answer)."""

    def tool_started(self, name: str) -> None:
        """A tool call is about to run (``name`` comes from the model: untrusted)."""

    def tool_finished(self, name: str, ok: bool, payload: dict[str, Any]) -> None:
        """A tool call ended and its execution is committed; ``payload`` is what the model is told."""

    def nudged(self, nudge: Nudge) -> None:
        """The guard corrected the model instead of accepting its answer."""

    def escalated(self) -> None:
        """The next turns are constrained by a JSON schema to a tool call or a final answer."""
