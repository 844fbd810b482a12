"""What a model turn is made of: its reply and the tool calls in it, as the ledger records them.

Shared by the model clients (``pipeline.model.llm``, ``pipeline.model.local``), the agent loop and the toolbox,
so none of them has to import another for its data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, exactly as the model sent it

    @classmethod
    def from_openai(cls, call: dict[str, Any]) -> ToolCall:
        """From an OpenAI-style ``{"id", "function": {"name", "arguments"}}``."""
        return cls(call["id"], call["function"]["name"], call["function"]["arguments"])

    def as_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Reply:
    """One model turn, as the ledger records it."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    served_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = 0.0
    finish_reason: str | None = None

    def as_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            msg["tool_calls"] = [c.as_openai() for c in self.tool_calls]
        return msg


