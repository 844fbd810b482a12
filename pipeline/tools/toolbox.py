"""Capabilities as tools: declared from a function's signature, run by one dispatcher.

A capability is a plain function ``fn(ctx, arg: Annotated[type, "description"], …)``
whose docstring is the tool description the model sees.
``@capability`` builds a pydantic model from the signature, so the JSON schema
offered to the model and the validation applied to its arguments are the same
object. A capability without a docstring, or with an undescribed argument,
fails at import time — not in the middle of a run.

``Toolbox.execute`` is the only way a capability runs. It records every call in
the ledger: rejected calls (unknown tool, bad JSON, schema violation) as failed
executions, real ones as a row opened before the work and closed after it. The
result the model sees is produced only after that row is committed, so the
model is never told about a success the ledger does not hold.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import CapabilityError, ToolArgumentsError
from ..model import calls
from ..model.messages import ToolCall
from ..runtime.tracing import traced_tool
from .claims import Lexicon

if TYPE_CHECKING:
    from ..config import RunSettings
    from ..ledger.writer import Ledger
    from ..model.llm import ChatModel
    from .prompts import Prompts

log = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What a capability may use: this run's id, settings, ledger, model and prompts."""

    run_id: str
    # What the steps read of the config (``Config.run_settings``), not the whole run config.
    settings: RunSettings
    ledger: Ledger
    llm: ChatModel
    prompts: Prompts
    # The run's budget of failed platform requests (pipeline.publishing.publishers.remote.AttemptBudget),
    # made by the first publish call and shared by every later one.
    platform_budget: Any = None
    # `pipeline run --dry-run`: publish writes a preview and ends the run instead of calling the platform.
    dry_run: bool = False
    # Set by `pipeline review approve`: who approved this run's article (publish may proceed).
    approved_by: str | None = None


@dataclass
class ToolResult:
    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    # The keys of a success the model reads; empty: all of them. The ledger keeps the whole payload.
    shown: tuple[str, ...] = ()

    def content(self) -> str:
        from ..text.redact import scrub

        payload = {k: v for k, v in self.payload.items() if k in self.shown} if self.ok and self.shown else self.payload
        # What the model reads (and could write into an article) carries no secret an error body echoed.
        return scrub(json.dumps({"ok": self.ok, **payload}, ensure_ascii=False))


NO_LEXICON = Lexicon()  # a capability no text can claim


@dataclass(frozen=True)
class Capability:
    """One step of the pipeline, declared once by ``@capability`` in its own module of ``capabilities``.

    Everything else about it is derived from this: the tool schema (from the signature), the value
    a claim can quote (``fact``: a key of its result), how text claims it (``lexicon``), its place in
    the pipeline (``order``), and what the guard's next-step nudge says about it.
    """

    name: str
    description: str
    arguments: type[BaseModel]
    fn: Callable[..., dict[str, Any]]
    order: int
    fact: str | None = None
    lexicon: Lexicon = NO_LEXICON
    # Whether a successful execution finishes the step (a humanize below the threshold does not).
    finished: Callable[[dict[str, Any]], bool] = lambda result: True
    # Extra values for this step's `needs_<name>` nudge line, from its own earlier results.
    hint: Callable[[list[dict[str, Any]]], dict[str, Any]] = lambda results: {}
    # The result keys the model reads back (empty: all). Every token of a result is read again at each
    # later turn: on the 2-core embedded model, 200 tokens of report text cost about 3 s a turn.
    shown: tuple[str, ...] = ()

    @property
    def argument_names(self) -> list[str]:
        return list(self.arguments.model_fields)

    def schema(self) -> dict[str, Any]:
        params = self.arguments.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": params}}


def capability(*, order: int, fact: str | None = None, lexicon: Lexicon = NO_LEXICON,
               finished: Callable[[dict[str, Any]], bool] | None = None,
               hint: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None,
               shown: tuple[str, ...] = (),
               ) -> Callable[[Callable[..., dict[str, Any]]], Capability]:
    """Declare ``fn(ctx, …)`` a capability named after the function; see ``Capability`` for the rest."""

    def declare(fn: Callable[..., dict[str, Any]]) -> Capability:
        extra: dict[str, Any] = {k: v for k, v in (("finished", finished), ("hint", hint)) if v is not None}
        return Capability(fn.__name__, _description(fn), _arguments(fn), fn, order, fact, lexicon, shown=shown, **extra)

    return declare


def _description(fn: Callable[..., Any]) -> str:
    description = inspect.getdoc(fn)
    if not description:
        raise TypeError(f"capability {fn.__name__!r} has no docstring: the model needs a description")
    return description


def _arguments(fn: Callable[..., Any]) -> type[BaseModel]:
    """A pydantic model of ``fn``'s arguments after ``ctx``: the schema the model sees is the validation applied."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for pname, param in list(inspect.signature(fn).parameters.items())[1:]:
        hint = hints.get(pname)
        if get_origin(hint) is not Annotated:
            raise TypeError(f"capability {fn.__name__!r}: argument {pname!r} needs Annotated[type, 'description']")
        base, *meta = get_args(hint)
        desc = next((m for m in meta if isinstance(m, str)), None)
        if not desc:
            raise TypeError(f"capability {fn.__name__!r}: argument {pname!r} has no description")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (base, Field(default, description=desc))
    return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def _schema_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        msg = "unexpected argument" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


class Toolbox:
    """The registry of capabilities offered to the model, and their dispatcher."""

    def __init__(self, capabilities: Iterable[Capability]) -> None:
        self.capabilities = {c.name: c for c in capabilities}
        self._schemas = [c.schema() for c in self.capabilities.values()]  # built once: sent every turn

    @property
    def names(self) -> list[str]:
        return list(self.capabilities)

    def schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def _parse(self, call: ToolCall) -> tuple[Capability, BaseModel]:
        cap = self.capabilities.get(call.name)
        if cap is None:
            raise ToolArgumentsError(f"unknown tool {call.name!r}; the tools are: {', '.join(self.names)}")
        try:
            raw = json.loads(call.arguments) if call.arguments and call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolArgumentsError(f"arguments for {call.name} are not valid JSON ({exc.msg} at char {exc.pos}); send a JSON object") from None
        if not isinstance(raw, dict):
            raise ToolArgumentsError(f"arguments for {call.name} must be a JSON object, not {type(raw).__name__}")
        try:
            return cap, cap.arguments.model_validate(raw)
        except ValidationError as exc:
            raise ToolArgumentsError(f"arguments for {call.name} do not fit its schema: {_schema_errors(exc)}") from None

    @traced_tool
    def execute(self, ctx: RunContext, call: ToolCall, turn: Any = None) -> ToolResult:
        try:
            cap, args = self._parse(call)
        except ToolArgumentsError as exc:
            ctx.ledger.record_failed_call(ctx.run_id, turn, call.id, call.name, call.arguments, str(exc))
            return ToolResult(False, {"error": str(exc)})

        execution = ctx.ledger.open_execution(ctx.run_id, turn, call.id, cap.name, args.model_dump_json())
        try:
            with calls.step(ctx.ledger, ctx.run_id, execution):  # its own model calls are recorded with it
                result = cap.fn(ctx, **args.model_dump())
        except CapabilityError as exc:
            ctx.ledger.close_execution(execution, ok=False, error=str(exc))
            return ToolResult(False, {"error": str(exc)})
        except BaseException as exc:
            # Not the model's fault: record it, then let the run end on it.
            ctx.ledger.close_execution(execution, ok=False, error=f"{type(exc).__name__}: {exc}")
            raise
        ctx.ledger.close_execution(execution, ok=True, result=result)
        return ToolResult(True, result, cap.shown)
