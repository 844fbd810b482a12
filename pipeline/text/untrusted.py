"""Untrusted text made inert for display.

Model output, feed items, platform responses and error bodies are stored exactly as
received; only their *display* is transformed. Two dangers: Rich reads ``[...]`` as
markup (``[/]`` raises, ``[red]`` vanishes), and a terminal obeys control sequences
(ESC, BEL, OSC title-setting) and bidi overrides (U+202E) that reorder what it shows.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, C1 controls, and the bidi embedding/override/isolate marks.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What XML 1.0 allows (https://www.w3.org/TR/xml/#charsets); anything else makes a feed invalid.
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _show(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` with control characters and bidi overrides written out as escapes (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_show, str(text))


def for_rich(text: object) -> str:
    """``text`` safe to embed in a Rich markup string: escaped markup, visible controls."""
    from rich.markup import escape  # rich is imported by every display path anyway

    return escape(visible(text))


def for_xml(text: object) -> str:
    """``text`` for an XML document: what XML 1.0 forbids dropped (XML has no escape for it), other controls visible."""
    return visible(_NOT_XML.sub("", str(text)))
