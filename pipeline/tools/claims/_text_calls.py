"""Tool calls written as text instead of sent through ``tools``: found, so the model can be told to send them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

# --- text tool calls ---------------------------------------------------------

_TOOLCALL_TAG = re.compile(r"<\s*/?\s*(tool_call|tool_calls|function_call|function|tools)\b[^>]*>", re.IGNORECASE)
_JSON_CANDIDATE = re.compile(r"\{[^{}]*(\{[^{}]*\}[^{}]*)*\}", re.DOTALL)
# A call written as JSON-ish text that does not parse: placeholders (`"article_id": <article_id>`),
# single quotes, trailing commas. The tool's name in a name/tool/function field is enough.
_NAMED_CALL = re.compile(r"""["']?(?:name|tool|tool_name|function)["']?\s*[:=]\s*["'](\w+)["']""", re.IGNORECASE)
_CALL_SHAPE = re.compile(r"""["']?(?:arguments|parameters|args)["']?\s*[:=]|<\w+>""", re.IGNORECASE)


def text_tool_calls(text: str, tool_names: Iterable[str]) -> list[str]:
    """Names of tools the model *wrote* as a call instead of calling. Never executed."""
    names = set(tool_names)
    text = text or ""
    found: list[str] = []
    if _TOOLCALL_TAG.search(text):
        found.append("<tool_call>")
    for m in _JSON_CANDIDATE.finditer(text):
        candidate = m.group(0)
        try:
            obj = json.loads(candidate)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            fn = obj["function"] if isinstance(obj.get("function"), dict) else obj
            name = fn.get("name") or fn.get("tool") or obj.get("tool_name")
            candidates = [name] if isinstance(name, str) else []
        elif obj is None and _CALL_SHAPE.search(candidate):
            candidates = _NAMED_CALL.findall(candidate)
        else:
            candidates = []
        for name in candidates:
            if name in names and name not in found:
                found.append(name)
    if _CALL_SHAPE.search(text):  # unbalanced braces: a call cut short or with a stray bracket
        for name in _NAMED_CALL.findall(text):
            if name in names and name not in found:
                found.append(name)
    for name in names:
        if re.search(rf"\b{re.escape(name)}\s*\(\s*[\w\"'{{<]", text) and name not in found:
            found.append(name)
    return found
