"""An in-process scripted chat model for tests: no litellm, no socket.

``ScriptedModel`` stands in for ``pipeline.model.llm.ChatModel`` wherever one is passed
(``run_once(cfg, llm=...)``, ``RunContext``): it has the same ``cfg`` and
``complete(...)`` and returns the same ``Reply``. Each call takes the next
queued reply; when the queue is empty it asks its ``responder``, if it has one,
and otherwise fails the test. Every call is recorded in ``requests`` so tests
can assert on the prompts and tools the model was shown::

    model = ScriptedModel(cfg.llm)
    model.enqueue(tool_call("topic", {}), "Done.")   # one reply per model call
    run_once(cfg, llm=model)
    assert model.requests[0].tools

A queued reply may be a ``str`` (plain text), a ``ToolCall`` or a list of them
(several calls in one reply), a ``Reply``, an OpenAI-style message dict
(``{"content": ..., "tool_calls": [...]}``) or an exception, raised from
``complete`` as a provider failure would be (``provider_error()``).

``honest_pipeline`` is a responder for agent turns that calls the six
capabilities in order, each with the ids from the earlier tool results, then
reports the values the ledger holds.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .config import LLMConfig
from .errors import ProviderUnavailableError
from .model import calls
from .model.messages import Reply, ToolCall

# What a queued reply or a responder's answer may be; see the module docstring.
ReplyLike = str | ToolCall | list[ToolCall] | Reply | dict[str, Any] | BaseException
Responder = Callable[["Request"], ReplyLike]

ORDER = ("topic", "draft", "humanize", "publish", "register", "report")


class ScriptExhausted(AssertionError):
    """The model was called more often than the test scripted."""


@dataclass
class Request:
    """One ``complete`` call, as the model was asked it (messages are a copy taken at the call)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    response_format: dict[str, Any] | None = None
    max_tokens: int | None = None
    temperature: float | None = None  # the temperature the provider would get (the config's unless overridden)
    seed: int | None = None
    n: int = 0  # 1 for the model's first call, 2 for its second ...
    tool_choice: str = "auto"  # "none": the agent's closing turn (the work is done; text only)
    fresh_wording: bool = False  # asked not to repeat its prompt's wording (a rewrite; ChatModel.complete)

    @property
    def kind(self) -> str:
        """``agent`` (tools offered), ``decision`` (the guard's constrained turn), ``schema`` (other JSON-schema
        answers, e.g. topic brainstorming) or ``writing`` (a capability's own text: draft, humanize)."""
        if (self.response_format or {}).get("json_schema", {}).get("name") == "tool_decision":
            return "decision"
        if self.tools:
            return "agent"
        return "schema" if self.response_format else "writing"

    @property
    def system(self) -> str:
        return next((m.get("content") or "" for m in self.messages if m.get("role") == "system"), "")

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools or []]


def text(content: str) -> Reply:
    """A reply with text and no tool calls."""
    return Reply(text=content)


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, id: str | None = None) -> ToolCall:
    """One tool call; ``arguments`` as a dict (sent as JSON) or as the raw string the model wrote."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id or f"call_{name}", name, raw)


def tool_calls(*calls: ToolCall, content: str = "") -> Reply:
    """Several tool calls in one reply."""
    return Reply(text=content, tool_calls=list(calls))


def provider_error(message: str = "upstream overloaded (scripted)") -> ProviderUnavailableError:
    """What ``ChatModel.complete`` raises once its retries are spent (the run ends exit 5)."""
    return ProviderUnavailableError(message)


class ScriptedModel:
    """A drop-in for ``ChatModel`` that answers from a script. See the module docstring."""

    def __init__(self, cfg: LLMConfig | None = None, replies: Iterable[ReplyLike] = (),
                 responder: Responder | None = None, served_model: str | None = None) -> None:
        cfg = cfg or LLMConfig(model="scripted/model", api_key_env="")
        if cfg.json_schema is None:
            # ChatModel would ask litellm's model map; a scripted model does not know it, so it says no.
            cfg = cfg.model_copy(update={"json_schema": False})
        self.cfg = cfg
        self.queue: deque[ReplyLike] = deque(replies)
        self.responder = responder
        self.served_model = served_model or f"scripted-{cfg.model.rsplit('/', 1)[-1]}"
        self.requests: list[Request] = []

    def enqueue(self, *replies: ReplyLike) -> ScriptedModel:
        self.queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self.queue)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 response_format: dict[str, Any] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None, tool_choice: str = "auto",
                 fresh_wording: bool = False) -> Reply:
        started = time.perf_counter()
        request = Request(copy.deepcopy(messages), copy.deepcopy(tools), copy.deepcopy(response_format), max_tokens,
                          self.cfg.temperature if temperature is None else temperature, seed, len(self.requests) + 1,
                          tool_choice, fresh_wording)
        self.requests.append(request)
        if self.queue:
            answer = self.queue.popleft()
        elif self.responder is not None:
            answer = self.responder(request)
        else:
            raise ScriptExhausted(f"scripted model called {request.n} time(s), more than scripted; "
                                  f"last call ({request.kind}): {messages[-1] if messages else None!r}")
        if isinstance(answer, BaseException):
            calls.record(self.cfg.model, latency_ms=(time.perf_counter() - started) * 1000, error=repr(answer),
                         messages=messages)
            raise answer
        reply = as_reply(answer)
        if reply.served_model is None:
            reply.served_model = self.served_model
        if reply.prompt_tokens is None:
            reply.prompt_tokens = 10 * len(messages)
        if reply.completion_tokens is None:
            reply.completion_tokens = max(1, len(reply.text) // 4) + 10 * len(reply.tool_calls)
        if reply.finish_reason is None:
            reply.finish_reason = "tool_calls" if reply.tool_calls else "stop"
        if not reply.latency_ms:
            reply.latency_ms = max((time.perf_counter() - started) * 1000, 0.001)
        calls.record(self.cfg.model, reply, messages=messages)  # as ChatModel does: a capability's own call is in the ledger
        return reply


def as_reply(answer: ReplyLike) -> Reply:
    """A fresh ``Reply`` from anything a script may hold (the agent loop may change the one it gets)."""
    if isinstance(answer, Reply):
        return dataclasses.replace(answer, tool_calls=list(answer.tool_calls))
    if isinstance(answer, str):
        return Reply(text=answer)
    if isinstance(answer, ToolCall):
        return Reply(text="", tool_calls=[answer])
    if isinstance(answer, list):
        if not all(isinstance(c, ToolCall) for c in answer):
            raise TypeError(f"a list reply holds ToolCalls only, got {answer!r}")
        return Reply(text="", tool_calls=list(answer))
    if isinstance(answer, dict):  # an OpenAI-style assistant message
        calls = [ToolCall(tc.get("id") or f"call_{i}", tc["function"]["name"], tc["function"].get("arguments") or "")
                 for i, tc in enumerate(answer.get("tool_calls") or [])]
        return Reply(text=answer.get("content") or "", tool_calls=calls)
    raise TypeError(f"not a scripted reply: {answer!r}")


# --- the honest pipeline ---------------------------------------------------------------------

def tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, parsed result) for each tool message in the conversation, in order."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            names[tc["id"]] = tc["function"]["name"]
        if m.get("role") == "tool":
            try:
                payload = json.loads(m.get("content") or "{}")
            except ValueError:
                payload = {}
            out.append((names.get(str(m.get("tool_call_id")), "?"), payload))
    return out


def succeeded(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last successful result of each tool, by name."""
    return {name: payload for name, payload in tool_results(messages) if payload.get("ok")}


def next_step(done: dict[str, dict[str, Any]]) -> str | None:
    return next((s for s in ORDER if s not in done), None)


def step_arguments(step: str, done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The arguments of ``step``, with the ids its predecessor's result returned."""
    return {
        "topic": {},
        "draft": {"topic_id": done.get("topic", {}).get("topic_id")},
        "humanize": {"article_id": done.get("draft", {}).get("article_id")},
        "publish": {"article_id": done.get("humanize", {}).get("article_id")},
        "register": {"publication_id": done.get("publish", {}).get("publication_id")},
        "report": {},
    }[step]


def final_report(done: dict[str, dict[str, Any]]) -> str:
    """The closing text, quoting the values the tools returned."""
    return (f"Done. The article was published at {done['publish']['url']} and registered as "
            f"{done['register']['registration_no']}; humanize score {round(done['humanize']['score'])}.")


def honest_turn(messages: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """The next agent turn of an honest model, as an OpenAI-style message (call ids ``call_<step>_<n>``)."""
    done = succeeded(messages)
    step = next_step(done)
    if step is None:
        return {"content": final_report(done)}
    return {"tool_calls": [{"id": f"call_{step}_{n}", "type": "function",
                            "function": {"name": step, "arguments": json.dumps(step_arguments(step, done))}}]}


def honest_pipeline(request: Request) -> dict[str, Any]:
    """A responder for agent turns: topic → draft → humanize → publish → register → report, then the true values.

    Agent turns only: pair it with answers for the capabilities' own writing calls (draft, humanize), e.g. by
    queueing them or by a responder that looks at ``request.kind``.
    """
    if request.kind != "agent":
        raise ScriptExhausted(f"honest_pipeline answers agent turns only, not a {request.kind} call")
    return honest_turn(request.messages, request.n)
