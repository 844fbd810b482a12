"""Citations: a marker after each paragraph naming the sources its statements came from, and the Sources list.

The markers come from the grounding check, not from the model: a paragraph cites the sources whose spans hold its
statements' specifics (or, for a paragraph of plain words, the span it shares most words with). Every section
cites at least one source: a section none of whose paragraphs could be traced cites the source its words are
closest to. The list goes at the end of the body, so every publisher shows it as part of the article: a web
source by its title and link, the operator's notes by title and file name (a local file is no link for a reader).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.text import article as art

from .grounding import Grounding, Index

NOTES = {"en": "the author's notes", "zh": "作者的笔记"}


def _marker(positions: list[int]) -> str:
    return "".join(f"[{p}]" for p in positions)


def cite(body: str, grounding: Grounding, index: Index, sources: list[Any], language: str) -> str:
    """``body`` with its citation markers and the Sources list."""
    by_line: dict[int, list[int]] = {}
    for s in grounding.statements:
        for span in s.support:
            seen = by_line.setdefault(s.line, [])
            if span["source"] not in seen:
                seen.append(span["source"])
    out: list[str] = []
    section_cited, section_start = False, 0
    bs = art.blocks(body)
    for b in bs:
        if b.kind == "heading":
            if out and not section_cited and section_start < len(out):
                _cite_closest(out, section_start, index)
            out.append(b.text)
            section_cited, section_start = False, len(out)
            continue
        if b.kind not in ("paragraph", "quote"):
            out.append(b.text)
            continue
        positions = sorted(by_line.get(b.line, []))
        if positions:
            section_cited = True
            out.append(f"{b.text} {_marker(positions)}")
        else:
            out.append(b.text)
    if not section_cited and section_start < len(out):
        _cite_closest(out, section_start, index)
    # Every source the article was written from is listed, in its number's place (a gap would renumber the list).
    return "\n\n".join(out + sources_list(sources, list(range(1, len(sources) + 1)), language))


def _cite_closest(out: list[str], start: int, index: Index) -> None:
    """The section from ``out[start]`` on cited none: its paragraph closest to a source span cites that source."""
    best: tuple[int, int] | None = None
    for j in range(start, len(out)):
        if out[j].lstrip().startswith(("#", "```", "~~~")):
            continue
        support = index.support([], out[j])
        if support:
            best = (j, support[0]["source"])
            break
    if best is None:
        first = next((j for j in range(start, len(out)) if not out[j].lstrip().startswith(("#", "```", "~~~"))), None)
        if first is None or not index.sources:
            return
        best = (first, index.sources[0].position)
    k, position = best
    out[k] = f"{out[k]} {_marker([position])}"


def sources_list(sources: list[Any], used: list[int], language: str) -> list[str]:
    """The Sources heading and one numbered line per source a marker names."""
    lang = "zh" if language == "zh" else "en"
    lines = []
    for n, src in enumerate(sources, 1):
        if n not in used:
            continue
        if src.url:
            lines.append(f"{n}. [{src.title}]({src.url})")
        else:
            where = Path(src.location).name
            lines.append(f"{n}. {src.title}（{NOTES[lang]}，{where}）" if lang == "zh" else
                         f"{n}. {src.title} ({NOTES[lang]}, {where})")
    return [f"## {art.SOURCES_HEADING[lang]}", "\n".join(lines)] if lines else []
