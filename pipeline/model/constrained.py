"""Tool calls as one constrained JSON object: reliable tool use from models that ignore ``tools``.

Small models asked through the OpenAI ``tools`` route mostly answer in prose
(see README, "The embedded model"). Forced by a JSON schema to emit either
one call of an offered tool or a final answer, and told which tools have not
run yet, the same model makes the right call at each step. This module is that
translation and nothing else, provider-neutral: the embedded local model always
speaks it (``pipeline.model.local.provider``), and the agent loop escalates any provider
that honours ``response_format`` json_schema to it:

    tools    -> one schema: anyOf {"tool": const NAME, "arguments": <its parameters>} … | {"final_answer": str}
    history  -> assistant tool calls and tool results rewritten as that same JSON, so
                the model sees one consistent protocol, plus a one-line progress note
    reply    -> parse_constrained(text) -> (content, OpenAI-style tool_calls)

The decision prompt lists tools as ``name(arg, …)`` only: the grammar already
enforces names and argument types, and every prompt token costs time on CPU.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

SCHEMA_NAME = "tool_decision"

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = tool.get("function", tool)
    return function


def constrained_tools_schema(tools: list[dict[str, Any]], tool_choice: Any = "auto") -> dict[str, Any]:
    """One JSON schema that accepts exactly one call of an offered tool, or a final answer.

    ``tool_choice`` keeps its OpenAI meaning: "required" drops the final answer,
    {"function": {"name": X}} allows only X, "none" allows only the final answer.
    """
    forced = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
    branches: list[dict[str, Any]] = []
    for tool in tools if tool_choice != "none" else []:
        fn = _function(tool)
        if forced and fn["name"] != forced:
            continue
        params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
        params.setdefault("type", "object")
        # "tool" is listed first so the grammar makes the model commit to a name before arguments.
        branches.append({
            "type": "object",
            "properties": {"tool": {"const": fn["name"]}, "arguments": params},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        })
    if tool_choice in ("auto", None, "none") or not branches:
        branches.append({
            "type": "object",
            "properties": {"final_answer": {"type": "string"}},
            "required": ["final_answer"],
            "additionalProperties": False,
        })
    return {"anyOf": branches}


def constrained_response_format(tools: list[dict[str, Any]], tool_choice: Any = "auto", wrap: bool = False) -> dict[str, Any]:
    """The OpenAI ``response_format`` carrying ``constrained_tools_schema(tools, tool_choice)``.

    ``wrap``: hosted providers want an object at the root (OpenAI rejects a root ``anyOf``), so the
    decision goes under ``{"call": …}``; ``parse_constrained`` accepts both shapes.
    """
    schema = constrained_tools_schema(tools, tool_choice)
    if wrap:
        schema = {"type": "object", "properties": {"call": schema}, "required": ["call"], "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": not wrap}}


def decision_prompt(tools: list[dict[str, Any]]) -> str:
    """The static instruction appended to the system prompt: the protocol and the tool names."""
    sigs = []
    for tool in tools:
        fn = _function(tool)
        sigs.append(f"{fn['name']}({', '.join((fn.get('parameters') or {}).get('properties', {}))})")
    return ('Reply with one JSON object: the next tool call as {"tool": NAME, "arguments": {...}}, '
            'or {"final_answer": "..."} only when the task is complete. '
            f"Tools: {', '.join(sigs)}.")


def progress_note(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """Which tools have succeeded so far and which have not been called, from the history alone.

    Measured on Qwen2.5-Coder-1.5B: without this line the model answers
    {"final_answer": "…published…"} at turn 0 in 3 of 3 tries and again as soon as it
    holds a URL; with it, it made the right call at every step of the pipeline.
    """
    names: dict[str, str] = {}
    done: list[str] = []
    for msg in messages:
        for tc in msg.get("tool_calls") or []:
            names[tc.get("id", "")] = tc.get("function", {}).get("name", "")
        if msg.get("role") == "tool":
            name = names.get(msg.get("tool_call_id", ""), "?")
            try:
                payload = json.loads(msg.get("content") or "{}")
                ok = payload.get("ok", True) is not False
                below = payload.get("passed") is False  # humanize ran but scored under the threshold
            except (json.JSONDecodeError, AttributeError):
                ok, below = True, False
            done.append(f"{name} (below threshold)" if ok and below else name if ok else f"{name} (error)")
    succeeded = {d for d in done if not d.endswith(")")}
    todo = [_function(t)["name"] for t in tools if _function(t)["name"] not in succeeded]
    note = f"Progress: {' -> '.join(done) or 'no tool called yet'}."
    return note + (f" Not done yet: {', '.join(todo)}. Call the next one the task needs." if todo
                   else " Every tool has been called.")


def decision_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation rewritten for the JSON protocol (no ``tool`` roles, no ``tool_calls``).

    The static instruction goes into the system prompt (a stable prefix the
    prompt cache reuses); the progress note goes last, where a small model heeds it.
    """
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "assistant" and msg.get("tool_calls"):
            calls = []
            for tc in msg["tool_calls"]:
                fn = tc.get("function", {})
                names[tc.get("id", "")] = fn.get("name", "")
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = fn.get("arguments")
                calls.append(json.dumps({"tool": fn.get("name"), "arguments": args}, ensure_ascii=False))
            out.append({"role": "assistant", "content": "\n".join(calls)})
        elif role == "tool":
            name = names.get(msg.get("tool_call_id", ""), "the tool")
            out.append({"role": "user", "content": f"Result of {name}: {content}"})
        elif role == "assistant" and not content.lstrip().startswith("{"):
            # Earlier prose turns are re-shown in the protocol, or the model copies the prose habit.
            out.append({"role": "assistant", "content": json.dumps({"final_answer": content}, ensure_ascii=False)})
        else:
            out.append({"role": role, "content": content})
    # Consecutive user turns (parallel results, a nudge after a result) are merged:
    # some chat templates reject or garble two user turns in a row.
    merged: list[dict[str, Any]] = []
    for msg in out:
        if merged and msg["role"] == "user" and merged[-1]["role"] == "user":
            merged[-1] = {"role": "user", "content": merged[-1]["content"] + "\n\n" + msg["content"]}
        else:
            merged.append(msg)
    if merged and merged[0]["role"] == "system":
        merged[0] = {"role": "system", "content": merged[0]["content"] + "\n\n" + decision_prompt(tools)}
    else:
        merged.insert(0, {"role": "system", "content": decision_prompt(tools)})
    note = progress_note(messages, tools)
    if merged[-1]["role"] == "user":
        merged[-1] = {"role": "user", "content": merged[-1]["content"] + "\n\n" + note}
    else:
        merged.append({"role": "user", "content": note})
    return merged


def parse_constrained(text: str) -> tuple[str, list[dict[str, Any]]]:
    """``(content, tool_calls)`` from a constrained reply; text that is not the protocol comes back as content."""
    raw = text or ""
    fenced = _FENCE.match(raw)
    body = fenced.group(1) if fenced else raw
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        try:  # a final answer cut off by max_tokens: keep what was said
            data = json.loads(body.rstrip() + '"}')
        except json.JSONDecodeError:
            return raw, []
        if not isinstance(data, dict) or "final_answer" not in data:
            return raw, []
    if isinstance(data, dict) and set(data) == {"call"} and isinstance(data["call"], dict):
        data = data["call"]  # the wrapped shape (constrained_response_format(wrap=True))
    if isinstance(data, dict) and isinstance(data.get("tool"), str) and data["tool"]:
        args = data.get("arguments", {})
        if isinstance(args, str):  # some providers double-encode
            try:
                args = json.loads(args or "{}")
            except json.JSONDecodeError:
                pass
        arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)
        call = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": data["tool"], "arguments": arguments}}
        return "", [call]
    if isinstance(data, dict) and isinstance(data.get("final_answer"), str):
        return data["final_answer"], []
    return raw, []
