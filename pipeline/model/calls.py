"""Side calls: every model call a capability makes is recorded in the ledger, linked to its step.

The agent's own calls are recorded as its assistant turns (``pipeline.run.agent``). A capability that
calls the model itself (draft, humanize, the topic brainstorm) goes through the same
``ChatModel.complete``; while ``Toolbox.execute`` runs a capability it marks the step here (a
context variable: each thread of a daemon runs its own step), and ``ChatModel.complete`` records
each call made inside it as a ``model_calls`` row — tokens, latency, finish reason, or the error
that ended it — linked to the run and to the step's execution. Calls outside a step (agent turns)
are not recorded here, so nothing is counted twice.

The row is deferred like a turn: it commits with the capability's next write, which is at the
latest the execution's own closing row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..ledger.models import Execution
    from .messages import Reply


class Ledger(Protocol):
    """What a step needs of the ledger: deferring a row to the step's next write. (A protocol, not the writer:
    the scoring model records its passes here, and the writer's module depends on the config, which reads the
    scorer's pass mark.)"""

    def defer(self, obj: Any, parent: Any = None, attr: str = "turn_id") -> None: ...


@dataclass(frozen=True)
class Step:
    ledger: Ledger
    run_id: str
    execution: Execution


_step: ContextVar[Step | None] = ContextVar("pipeline_step", default=None)


@contextmanager
def step(ledger: Ledger, run_id: str, execution: Execution) -> Iterator[None]:
    """Model calls made inside this block belong to ``execution``."""
    token = _step.set(Step(ledger, run_id, execution))
    try:
        yield
    finally:
        _step.reset(token)


def record(requested_model: str, reply: Reply | None = None, *, latency_ms: float | None = None,
           error: str | None = None, prompt_tokens: int | None = None,
           messages: list[dict[str, Any]] | None = None) -> Any:
    """Record one side call, if a step is running (returns the row, or None outside a step), with the
    ``messages`` it sent and its reply's text.

    ``prompt_tokens`` without a ``reply``: a call that reads and writes nothing, such as the scoring model's pass."""
    current = _step.get()
    if current is None:
        return None
    from ..ledger.models import ModelCall

    row = ModelCall(run_id=current.run_id, capability=current.execution.capability, requested_model=requested_model,
                    error=error, latency_ms=latency_ms, prompt_tokens=prompt_tokens,
                    messages_json=None if messages is None else json.dumps(messages, ensure_ascii=False, default=str))
    if reply is not None:
        row.reply = reply.text
        row.served_model, row.finish_reason = reply.served_model, reply.finish_reason
        row.prompt_tokens, row.completion_tokens, row.latency_ms = reply.prompt_tokens, reply.completion_tokens, reply.latency_ms
    current.ledger.defer(row, current.execution, "execution_id")
    return row
