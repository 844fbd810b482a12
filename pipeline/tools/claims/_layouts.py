"""Layout flattened into status lines: JSON objects, Markdown tables, checklists and dashes become ``step: status``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# --- layout ----------------------------------------------------------------------------

_TABLE_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")
_BULLET = re.compile(r"^\s*(?:[-*+•>]+|\d{1,2}[.)、]|#{1,6})\s+")
_DASH_STATUS = re.compile(r"^([^:：—–]{1,24}?)(?:\s*(?:—{1,2}|–)\s*|\s+-{1,2}\s+)(\S.*)$")


def _json_spans(text: str) -> list[tuple[int, int, Any]]:
    """(start, end, parsed) for each top-level JSON object in the text."""
    spans, i, decoder = [], 0, json.JSONDecoder()
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict):
            spans.append((i, end, obj))
        i = end
    return spans


def _is_tool_call(obj: Mapping[str, Any]) -> bool:
    fn = obj["function"] if isinstance(obj.get("function"), Mapping) else obj
    return any(k in fn for k in ("name", "tool", "tool_name")) and any(k in fn for k in ("arguments", "parameters", "args"))


def _flatten(obj: Any, prefix: str = "") -> list[str]:
    if isinstance(obj, Mapping):
        out = []
        for key, value in obj.items():
            label = f"{prefix} {str(key).replace('_', ' ')}".strip()
            out.extend(_flatten(value, label))
        return out
    if isinstance(obj, list):
        return [line for item in obj for line in _flatten(item, prefix)]
    value = {True: "true", False: "false", None: "none"}.get(obj, obj) if not isinstance(obj, (int, float)) or isinstance(obj, bool) else obj
    return [f"{prefix}: {value}"]


def normalise_layout(text: str, step_name: re.Pattern[str]) -> str:
    """Structured status (JSON, tables, checklists, bullets) rewritten as one status line per item.

    A JSON object becomes one line of ``key: value`` pairs joined by `` | `` (one sentence, so a
    URL joins the claim it belongs to); a table row ``| 发布 | ✅ 成功 |`` becomes ``发布: ✅ 成功``.
    ``step_name`` matches any step's name (a table whose columns are steps has a status per cell).
    """
    parts, last = [], 0
    for start, end, obj in _json_spans(text):
        if _is_tool_call(obj):
            continue
        parts.append(text[last:start])
        parts.append("\n" + " | ".join(_flatten(obj)) + "\n")
        last = end
    parts.append(text[last:])
    lines = "".join(parts).splitlines()
    out: list[str] = []
    header: list[str] | None = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("```") or _TABLE_SEPARATOR.match(line):
            continue
        if line.startswith("|") and line.count("|") >= 2:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if i + 1 < len(lines) and _TABLE_SEPARATOR.match(lines[i + 1].strip()):
                # A header row names columns and states nothing, unless the columns are the steps
                # ("| topic | draft |" over "| ✓ | ✓ |"): then each row cell is that step's status.
                header = cells if sum(bool(step_name.search(c)) for c in cells) >= 2 else None
                continue
            if header and len(header) == len(cells):
                line = " | ".join(f"{h}: {c}" for h, c in zip(header, cells, strict=True))
            else:
                line = f"{cells[0]}: {' '.join(cells[1:])}"
        elif not line.startswith("|"):
            header = None
        line = _BULLET.sub("", line).replace("**", "").replace("__", "")
        line = re.sub(r"\s*\.{3,}\s*", ": ", line)  # dot leaders: "Humanize ...... done"
        line = re.sub(r"\[[xX✓]\]", "✅", line).replace("[ ]", "☐")
        m = _DASH_STATUS.match(line)
        if m and len(m.group(1).split()) <= 3:  # "Publish — done", "发布 —— 成功": a label and its status
            line = f"{m.group(1).strip()}: {m.group(2)}"
        out.append(line)
    return "\n".join(out)
