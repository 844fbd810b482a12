"""The grounding check: every specific of an article is in the sources it was written from.

For each sentence of the body (and each line of its code blocks) the check finds its specifics
(``pipeline.sources.specifics``) and looks each up in the sources' normalised text. A sentence with one that no
source holds is **unsupported**, and names it; a supported sentence is given the source span that holds most of
its specifics (and the next, when one span does not hold them all), which is where its citation points. Two more
rules, from the same principle:

* **no copying**: a run of ``COPIED`` words (Chinese: characters) shared with a fetched web page is allowed only
  inside quotation marks, where the quotation itself must be the page's words;
* **no invented experience**: first person ("we", "I", 我们) only when one of the sources is the operator's own
  notes; otherwise the article explains and attributes what its sources say.

Statements without a specific are recorded as such, with the span they share most words with (for their citation)
but no verdict: this check traces figures, names, commands and quotations, not the meaning of plain words.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.states import Grounded
from pipeline.text import article as art
from pipeline.text.article import CITATION

from .specifics import Specific, code_lines, normalise, numbers, specifics

COPIED = {"en": 12, "zh": 20}
_FIRST_PERSON = {
    "en": re.compile(r"(?<![\w'])(?:I|I'm|I've|I'd|[Mm]e|[Mm]y|[Mm]ine|[Ww]e|[Ww]e're|[Ww]e've|[Ww]e'd|[Uu]s|[Oo]ur|"
                     r"[Oo]urs|[Oo]urselves)(?![\w'])"),
    "zh": re.compile(r"我们|咱们|我(?!国)"),
}
_QUOTED = re.compile(r"[\"“][^\"“”\n]*[\"”]|「[^」\n]*」")
_CONTENT_WORD = re.compile(r"[a-z][a-z0-9'-]{3,}|[\u4e00-\u9fff]{2}")


@dataclass(frozen=True)
class SourceText:
    """One source as the check reads it."""

    position: int  # its number in the Sources list
    kind: str      # notes | web
    title: str
    text: str

    def spans(self) -> list[tuple[int, int, str]]:
        """(start, end, normalised text) of each sentence or bullet, offsets into ``text``."""
        out, at = [], 0
        for line in self.text.splitlines(keepends=True):
            body = line.strip()
            if body:
                pos = self.text.find(body, at)
                for s in art.sentences(body.lstrip("-*+ ").strip()):
                    start = self.text.find(s, pos)
                    if start >= 0:
                        out.append((start, start + len(s), normalise(s)))
                        pos = start + len(s)
            at += len(line)
        return out


@dataclass
class Index:
    """The sources, normalised once for every lookup of one check."""

    sources: list[SourceText]
    language: str
    extra: str = ""  # text that supports specifics without being cited: the topic line the operator wrote
    norm: str = field(init=False)
    figures: dict[str, set[str]] = field(init=False)
    spans: list[tuple[SourceText, int, int, str]] = field(init=False)
    web_runs: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        whole = "\n".join([s.text for s in self.sources] + [self.extra])
        self.norm = normalise(whole)
        self.figures = {}
        for _, key in numbers(whole):
            value, _, unit = key.partition(" ")
            self.figures.setdefault(value, set()).add(unit)
        self.spans = [(s, a, b, t) for s in self.sources for a, b, t in s.spans()]
        n = COPIED["zh" if self.language == "zh" else "en"]
        self.web_runs = frozenset().union(*(art.runs(s.text, self.language, n) for s in self.sources if s.kind == "web"))

    @property
    def has_notes(self) -> bool:
        return any(s.kind == "notes" for s in self.sources)

    def holds(self, sp: Specific) -> bool:
        if sp.kind == "number":
            value, _, unit = sp.key.partition(" ")
            units = self.figures.get(value, set())
            # A figure with a unit needs that unit in the source: "41 seconds" is not "41 min", nor "30 天" "30 个工时".
            return bool(units) and (not unit or unit in units)
        if sp.kind == "name":
            return re.search(rf"(?<![a-z0-9]){re.escape(sp.key)}(?![a-z0-9])", self.norm) is not None
        return sp.key in self.norm

    def in_span(self, sp: Specific, span_norm: str) -> bool:
        if sp.kind == "number":
            value = sp.key.partition(" ")[0]
            return any(k.partition(" ")[0] == value for _, k in numbers(span_norm))
        return sp.key in span_norm

    def support(self, found: list[Specific], sentence: str) -> list[dict[str, Any]]:
        """The spans that hold the sentence's specifics, fewest first (greedy cover, at most three); for a sentence
        without one, the span it shares most content words with, if it shares three."""
        out: list[dict[str, Any]] = []
        left = list(found)
        while left and len(out) < 3:
            best = max(self.spans, key=lambda x: sum(self.in_span(sp, x[3]) for sp in left), default=None)
            if best is None:
                break
            covered = [sp for sp in left if self.in_span(sp, best[3])]
            if not covered:
                break
            out.append(_span(best))
            left = [sp for sp in left if sp not in covered]
        if found:
            return out
        words = set(_CONTENT_WORD.findall(normalise(sentence)))
        if not words or not self.spans:
            return []
        best = max(self.spans, key=lambda x: len(words & set(_CONTENT_WORD.findall(x[3]))))
        shared = len(words & set(_CONTENT_WORD.findall(best[3])))
        return [_span(best) | {"related": True}] if shared >= 3 else []


def _span(x: tuple[SourceText, int, int, str]) -> dict[str, Any]:
    s, a, b, _ = x
    return {"source": s.position, "start": a, "end": b, "text": s.text[a:b]}


@dataclass
class Statement:
    line: int
    text: str
    status: Grounded
    specifics: list[dict[str, Any]]
    unsupported: list[str]
    support: list[dict[str, Any]]


@dataclass
class Grounding:
    statements: list[Statement]

    @property
    def failing(self) -> list[Statement]:
        return [s for s in self.statements if Grounded(s.status).failing]

    def problems(self, language: str) -> list[art.Problem]:
        """One problem per failing sentence, at its line, saying what to take out (the part is written again)."""
        out = []
        for s in self.failing:
            out.append(art.Problem("grounding", f"line {s.line}", told(s, language), s.line, found=s.text[:80]))
        return out

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for s in self.statements:
            counts[s.status] = counts.get(s.status, 0) + 1
        return {"statements": len(self.statements), "counts": counts,
                "unsupported": sum(len(s.unsupported) for s in self.statements)}

    def as_json(self) -> dict[str, Any]:
        return {"summary": self.summary(), "statements": [asdict(s) for s in self.statements]}


def told(s: Statement, language: str) -> str:
    """What a part written again is told of one failing sentence, in the article's language."""
    zh = language == "zh"
    quoted = "、".join(f"“{u}”" for u in s.unsupported) if zh else ", ".join(f"'{u}'" for u in s.unsupported)
    if s.status == Grounded.FIRST_PERSON:
        return (f"“{s.text[:40]}”用了第一人称，但资料里没有作者自己的经历：改成转述资料的内容" if zh else
                f"'{s.text[:60]}' speaks in the first person, but no source is the writer's own: say what the sources "
                "say instead")
    if s.status == Grounded.COPIED:
        return (f"“{s.text[:40]}”照抄了网页原文：用自己的话转述，或加引号注明出处" if zh else
                f"'{s.text[:60]}' copies the web page word for word: say it in your own words, or quote it")
    return (f"{quoted} 在资料里没有：只写资料里有的内容，删掉这些" if zh else
            f"{quoted} {'is' if len(s.unsupported) == 1 else 'are'} in no source: write only what the facts say, "
            "without it")


def _sentences_of(body: str) -> list[tuple[int, str, bool]]:
    """(line, text, is code) for every sentence of the prose and every line of the code blocks."""
    out = []
    for b in art.blocks(body):
        if b.kind == "code":
            out += [(b.line, ln, True) for ln in code_lines(b.text)]
        elif b.kind == "heading":
            out.append((b.line, art.heading_text(b), False))
        else:
            text = " ".join(ln.lstrip("-*+> ").strip() for ln in b.text.splitlines())
            out += [(b.line, s, False) for s in art.sentences(text)]
    return out


def check(title: str, body: str, index: Index) -> Grounding:
    """The grounding of ``title`` and ``body`` against ``index``'s sources."""
    lang = index.language
    n = COPIED["zh" if lang == "zh" else "en"]
    rows: list[Statement] = []
    items = [(0, title, False), *_sentences_of(body)]
    headings = {b.line for b in art.blocks(body) if b.kind == "heading"}
    for line, text, code in items:
        is_heading = line == 0 or line in headings
        if code:
            found = [Specific("code", text, normalise(text))]
        else:
            found = specifics(text, lang)
            if is_heading:  # Title Case capitalises every word: only marked names, figures and code count there
                found = [sp for sp in found if sp.kind != "name" or any(c.isdigit() for c in sp.text)
                         or sum(c.isupper() for c in sp.text) >= 2]
        missing = [sp.text for sp in found if not index.holds(sp)]
        prose = CITATION.sub("", _QUOTED.sub(" ", text))
        status = Grounded.UNSUPPORTED if missing else Grounded.SUPPORTED if found else Grounded.NO_SPECIFICS
        if not code and not is_heading and not missing:
            if not index.has_notes and _FIRST_PERSON["zh" if lang == "zh" else "en"].search(prose):
                status = Grounded.FIRST_PERSON
            elif index.web_runs and art.runs(prose, lang, n) & index.web_runs:
                status = Grounded.COPIED
        support = [] if missing else index.support(found, text)
        rows.append(Statement(line, text, status, [{"kind": sp.kind, "text": sp.text, "in_sources": sp.text not in missing}
                                                   for sp in found], missing, support))
    return Grounding(rows)


def without_failing(body: str, grounding: Grounding, language: str) -> str:
    """``body`` with each failing sentence taken out (the last resort after the repairs: a claim no source holds is
    not published). A paragraph left empty goes with it; headings and code are kept."""
    failing = {(s.line, s.text) for s in grounding.failing if s.line}
    if not failing:
        return body
    out = []
    joiner = "" if language == "zh" else " "
    for b in art.blocks(body):
        if b.kind in ("paragraph", "quote", "list") and any(line == b.line for line, _ in failing):
            if b.kind == "list":  # an item that states a failing sentence goes, the list stays
                said = [t for line, t in failing if line == b.line]
                items = [ln for ln in b.text.splitlines() if not any(t in ln.lstrip("-*+> ").strip() for t in said)]
                if items:
                    out.append("\n".join(items))
                continue
            text = " ".join(ln.strip() for ln in b.text.splitlines())
            kept = [s for s in art.sentences(text) if (b.line, s) not in failing]
            if kept:
                out.append(joiner.join(kept))
            continue
        out.append(b.text)
    return "\n\n".join(out)


def index_of(sources: list[Any], language: str, topic: Any = None) -> Index:
    """The check's index of a topic's stored sources (in their Sources-list order); the topic's own line, which the
    operator wrote, supports its words too (the title names the topic), without being a source to cite."""
    extra = f"{topic.title}\n{topic.angle or ''}" if topic is not None else ""
    return Index([SourceText(n, s.kind, s.title, s.text) for n, s in enumerate(sources, 1)], language, extra)
