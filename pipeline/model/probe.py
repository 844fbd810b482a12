"""Provider capabilities, probed instead of guessed, and remembered in the ledger.

Whether a model honours ``response_format`` JSON schemas decides whether the guard
can escalate a model that writes prose to constrained turns (``pipeline.run.agent``).
litellm's model map knows the big hosted models but not a user's own llama.cpp,
vLLM or Ollama server behind ``openai/<name>``, and "not in the map" used to mean
"no": a failing run by default. Here each capability is answered, first that wins:

    [llm] json_schema        the operator's word (json_schema only)
    local/…, local-raw/…     the embedded model: constrained by construction
    litellm's model map      when it has an entry that says yes or no
    the ledger               a probe's answer for this model and api_base
    a probe                  two tiny requests, stored in provider_capabilities

The probe asks for a JSON object whose one field must be a random token that only
the schema names (honoured: the token comes back), and asks for a call of a
``ping`` tool (native ``tool_calls`` come back, or text). Usage is whether either
reply counted its prompt tokens. A probe that could not reach the provider is
stored with its error and asked again next time; so is one whose endpoint now
serves a different model (``served_model``). A refused request (400) means
"not supported"; a refused key is the operator's to fix (exit 2).
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ProviderUnavailableError

if TYPE_CHECKING:
    from ..ledger.models import ProviderCapability
    from ..ledger.writer import Ledger
    from .llm import ChatModel

log = logging.getLogger(__name__)

CAPABILITIES = ("json_schema", "tools", "usage")
PROBE_SCHEMA_NAME = "capability_probe"
PING_TOOL = {"type": "function", "function": {
    "name": "ping", "description": "Answer a ping. Takes no arguments.",
    "parameters": {"type": "object", "properties": {}}}}
_MAX_TOKENS = 32  # a probe answer is ~10 tokens; this only bounds a model that rambles


@dataclass
class Support:
    """What a configured model honours; None: nobody knows (the guard then assumes no)."""

    json_schema: bool | None = None
    tools: bool | None = None
    usage: bool | None = None
    sources: dict[str, str] = field(default_factory=dict)  # capability -> config | local | model map | probe
    probe_error: str | None = None  # the last probe could not reach the provider

    def get(self, name: str) -> bool | None:
        value: bool | None = getattr(self, name)
        return value

    def as_dict(self) -> dict[str, Any]:
        return {**{c: self.get(c) for c in CAPABILITIES}, "sources": self.sources, "probe_error": self.probe_error}


def known(llm: ChatModel, need: tuple[str, ...] = CAPABILITIES) -> Support:
    """What the config, the embedded provider and litellm's model map say, without a request.

    The map is read only when the config leaves one of ``need`` open: loading litellm costs a second."""
    from .llm import _load_litellm, is_local

    cfg = llm.cfg
    out = Support()
    if is_local(cfg.model):
        for c in CAPABILITIES:
            _set(out, c, True, "local")
        return out
    if cfg.json_schema is not None:  # the operator's word wins over the map
        _set(out, "json_schema", cfg.json_schema, "config")
    if all(out.get(c) is not None for c in need):
        return out
    try:
        info = _load_litellm().get_model_info(model=cfg.model)
    except Exception:  # litellm raises for a model missing from its map
        info = None
    if info:
        _set(out, "json_schema", info.get("supports_response_schema"), "model map")
        _set(out, "tools", info.get("supports_function_calling"), "model map")
        _set(out, "usage", True, "model map")  # every provider litellm maps reports usage
    return out


def support(llm: ChatModel, ledger: Ledger, *, served_model: str | None = None, refresh: bool = False,
            need: tuple[str, ...] = CAPABILITIES) -> Support:
    """``known(llm)``, the gaps filled from the ledger or, when it has no good answer for one of ``need``,
    by a probe (stored). ``refresh``: probe whatever is not known without a request, whatever the ledger says."""
    wanted = CAPABILITIES if refresh else need
    out = known(llm, wanted)
    if all(out.get(c) is not None for c in wanted):
        return out
    model, base = llm.cfg.model, llm.cfg.api_base or ""
    row = ledger.capability(model, base)
    changed = bool(served_model and row is not None and row.served_model and row.served_model != served_model)
    if refresh or row is None or row.error or changed:
        if changed:
            log.info("probe: %s at %s now serves %s (was %s): probing again", model, base or "its default endpoint",
                     served_model, row.served_model if row else None)
        row = probe(llm)
        ledger.record_capability(row)
    for c in CAPABILITIES:
        if out.get(c) is None:
            _set(out, c, getattr(row, c), "probe")
    out.probe_error = row.error
    return out


def supports_json_schema(llm: ChatModel, ledger: Ledger, served_model: str | None = None) -> bool:
    """Whether the guard may escalate this provider to JSON-schema constrained turns (unknown: no)."""
    answer = support(llm, ledger, served_model=served_model, need=("json_schema",))
    if answer.probe_error and answer.json_schema is None:
        log.warning("probe: could not ask %s whether it honours json_schema (%s); not escalating",
                    llm.cfg.model, answer.probe_error)
    return bool(answer.json_schema)


def probe(llm: ChatModel) -> ProviderCapability:
    """Ask the provider: two tiny requests. A wrong key raises (``ProviderRefused``, exit 2); an unreachable
    provider is recorded as the row's ``error`` (every answer None)."""
    from ..ledger.models import ProviderCapability
    from .llm import ProviderRefused

    row = ProviderCapability(model=llm.cfg.model, api_base=llm.cfg.api_base or "")
    token = secrets.token_hex(4)
    schema = {"type": "object", "properties": {"probe": {"type": "string", "enum": [token]}},
              "required": ["probe"], "additionalProperties": False}
    usage: list[bool] = []
    try:
        try:
            reply = llm.complete([{"role": "user", "content": "Reply with a JSON object."}], max_tokens=_MAX_TOKENS,
                                 temperature=0.0, response_format={"type": "json_schema", "json_schema": {
                                     "name": PROBE_SCHEMA_NAME, "strict": True, "schema": schema}})
            row.json_schema = _token(reply.text) == token
            row.served_model = reply.served_model
            usage.append(bool(reply.prompt_tokens))
        except ProviderRefused as exc:
            if exc.kind != "BadRequestError":
                raise  # a wrong key, no such model: the operator's to fix
            row.json_schema = False  # the server refused response_format
        try:
            reply = llm.complete([{"role": "user", "content": "Call the ping tool."}], tools=[PING_TOOL],
                                 max_tokens=_MAX_TOKENS, temperature=0.0)
            row.tools = bool(reply.tool_calls)  # native tool_calls; a call written as text is not one
            row.served_model = row.served_model or reply.served_model
            usage.append(bool(reply.prompt_tokens))
        except ProviderRefused as exc:
            if exc.kind != "BadRequestError":
                raise
            row.tools = False
    except ProviderUnavailableError as exc:
        row.json_schema = row.tools = None
        row.error = str(exc)
        return row
    row.usage = any(usage) if usage else None
    log.info("probe: %s at %s: json_schema %s, tools %s, usage %s", row.model, row.api_base or "its default endpoint",
             row.json_schema, row.tools, row.usage)
    return row


def _token(text: str) -> str | None:
    from .constrained import _FENCE

    text = (text or "").strip()
    if m := _FENCE.match(text):
        text = m.group(1)
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value.get("probe") if isinstance(value, dict) else None


def _set(out: Support, name: str, value: Any, source: str) -> None:
    if value is None or out.get(name) is not None:
        return
    setattr(out, name, bool(value))
    out.sources[name] = source
