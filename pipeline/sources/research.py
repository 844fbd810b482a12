"""Research: the facts an article is written from, each a statement with the span of the source it came from.

A source's sentences and bullets are its candidate facts. When a topic's sources hold no more than ``MAX_FACTS``
of them (the operator's notes do), every one is a fact, as written: nothing is lost or reworded. A longer source (a
web page) is narrowed by the model: shown the candidates most related to the topic, numbered, it answers under a
JSON schema with the ones that matter and a short statement of each. A statement is kept only if every specific it
states is in its own span (``grounding``'s rule, applied to the research itself); otherwise the span's own words are
the statement. Stored in ``source_facts``; a repeat call in the same run reuses them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .grounding import Index, SourceText
from .specifics import normalise, specifics

MAX_FACTS = 36        # facts given to the outline and the parts (~900 tokens of the system turn at most)
SHOWN = 60            # candidates the model chooses from, the most related to the topic first
MIN_CHARS = {"en": 25, "zh": 10}  # a candidate shorter than this ("Notes.", a date line) says nothing on its own
_WORD = re.compile(r"[a-z][a-z0-9'-]{2,}|[\u4e00-\u9fff]")

FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "minItems": 1, "maxItems": MAX_FACTS, "items": {
        "type": "object", "properties": {"n": {"type": "integer"}, "statement": {"type": "string"}},
        "required": ["n", "statement"], "additionalProperties": False}}},
    "required": ["facts"], "additionalProperties": False,
}


@dataclass(frozen=True)
class Candidate:
    source_id: int
    position: int
    start: int
    end: int
    text: str


def candidates(sources: list[Any], language: str) -> list[Candidate]:
    """Every sentence or bullet of the sources that can stand as a fact (not a heading line, not a fragment)."""
    out = []
    for position, src in enumerate(sources, 1):
        st = SourceText(position, src.kind, src.title, src.text)
        for start, end, _ in st.spans():
            text = src.text[start:end].strip()
            line_start = src.text.rfind("\n", 0, start) + 1
            if src.text[line_start:end].lstrip().startswith("#"):  # a heading names the notes, it states nothing
                continue
            if len(text) >= MIN_CHARS["zh" if language == "zh" else "en"]:
                out.append(Candidate(src.id, position, start, end, text))
    return out


def related(c: Candidate, topic: str) -> float:
    """The share of the topic's words the candidate has, with a small weight for having specifics."""
    words = set(_WORD.findall(normalise(topic)))
    have = set(_WORD.findall(normalise(c.text)))
    return len(words & have) / max(1, len(words)) + 0.1 * bool(specifics(c.text, "en"))


def choose(ctx: Any, topic: Any, found: list[Candidate], language: str) -> list[tuple[Candidate, str]]:
    """(candidate, statement) for the facts the article is written from."""
    if len(found) <= MAX_FACTS:
        return [(c, c.text) for c in found]
    about = f"{topic.title} {topic.angle or ''}"
    shown = sorted(found, key=lambda c: related(c, about), reverse=True)[:SHOWN]
    shown.sort(key=lambda c: (c.position, c.start))
    listed = "\n".join(f"{n}. {c.text}" for n, c in enumerate(shown, 1))
    prompt = ctx.prompts.render("research.zh.md" if language == "zh" else "research.md", title=topic.title,
                                angle=topic.angle or "", candidates=listed, count=MAX_FACTS)
    from pipeline.model.probe import supports_json_schema

    fmt = ({"type": "json_schema", "json_schema": {"name": "facts", "schema": FACTS_SCHEMA, "strict": True}}
           if supports_json_schema(ctx.llm, ctx.ledger) else None)
    reply = ctx.llm.complete([{"role": "user", "content": prompt}], response_format=fmt, max_tokens=60 * MAX_FACTS)
    try:
        picked = json.loads(reply.text[reply.text.find("{"):])["facts"]
    except (ValueError, KeyError, TypeError):
        picked = []
    out: list[tuple[Candidate, str]] = []
    for item in picked if isinstance(picked, list) else []:
        try:
            c = shown[int(item["n"]) - 1]
        except (KeyError, ValueError, TypeError, IndexError):
            continue
        statement = " ".join(str(item.get("statement", "")).split())
        own = Index([SourceText(1, "web", "", c.text)], language)
        # A statement that says more than its span (a figure, a name it lacks) is not the source's: its words are.
        if not statement or any(not own.holds(sp) for sp in specifics(statement, language)):
            statement = c.text
        if all(o[0] is not c for o in out):
            out.append((c, statement))
    return out or [(c, c.text) for c in shown[:MAX_FACTS]]


def facts_of(ctx: Any, topic: Any, sources: list[Any], language: str) -> list[Any]:
    """The topic's stored facts for this run, found (and stored) if there are none yet."""
    from sqlmodel import select

    from pipeline.ledger.models import SourceFact

    with ctx.ledger.read() as s:
        stored = s.exec(select(SourceFact).where(SourceFact.run_id == ctx.run_id, SourceFact.topic_id == topic.id)).all()
    if stored:
        return sorted(stored, key=lambda f: f.id or 0)
    rows = [SourceFact(run_id=ctx.run_id, topic_id=topic.id, source_id=c.source_id, statement=statement,
                       start=c.start, end=c.end) for c, statement in choose(ctx, topic, candidates(sources, language),
                                                                            language)]
    with ctx.ledger.write() as s:
        for row in rows:
            s.add(row)
    return rows


def listed(facts: list[Any], chosen: list[int] | None = None) -> str:
    """The facts as a prompt lists them, one a line (without their source's number: shown "[1]", a model writes it
    into the prose, and the citations are the system's to place)."""
    picked = facts if chosen is None else [facts[i] for i in chosen]
    return "\n".join(f"- {f.statement}" for f in picked)


VOICE = {
    ("en", True): "The facts come from the team's own notes: write as that team, in the first person plural (\"we\"), "
                  "about what the notes record and nothing more.",
    ("en", False): "The facts come from published sources, not from you: write in the third person and attribute "
                   "them (\"according to …\"); never write \"I\" or \"we\".",
    ("zh", True): "这些事实出自团队自己的笔记：以这个团队的口吻用“我们”来写，只写笔记里记下的事。",
    ("zh", False): "这些事实出自公开的资料，不是你的经历：用第三人称转述并注明出处（“据……”），不要用“我”或“我们”。",
}


def voice(sources: list[Any], language: str) -> str:
    """How the parts are told to speak: as the team when a source is its own notes, else attributing."""
    return VOICE[("zh" if language == "zh" else "en", any(s.kind == "notes" for s in sources))]


PER_PART = 4  # facts the opening and the closing are each written from


def _words(text: str) -> set[str]:
    return set(_WORD.findall(normalise(text)))


def assign(statements: list[str], points: list[str], thesis: str) -> tuple[list[list[int]], list[int], list[int]]:
    """Which facts (indices into ``statements``) each section, the opening and the closing are written from.

    A fact goes to the section whose heading and point share most words with it (ties: the section with fewer so
    far), and every section gets at least two (taken from the section with most). The opening and the closing get
    the ``PER_PART`` facts closest to the thesis, the opening first."""
    words = [_words(s) for s in statements]
    shares = [_words(p) for p in points]
    sections: list[list[int]] = [[] for _ in points]
    for i, w in enumerate(words):
        k = max(range(len(points)), key=lambda j: (len(w & shares[j]), -len(sections[j])))
        sections[k].append(i)
    for k in range(len(points)):
        while len(sections[k]) < 2:
            donor = max(range(len(points)), key=lambda j: len(sections[j]))
            if donor == k or len(sections[donor]) <= 2:
                break
            sections[k].append(sections[donor].pop())
        sections[k].sort()
    theirs = _words(thesis)
    closest = sorted(range(len(statements)), key=lambda i: -len(words[i] & theirs))
    return sections, sorted(closest[:PER_PART]), sorted(closest[PER_PART:2 * PER_PART] or closest[:PER_PART])



DIGEST_UNITS = {"en": 16, "zh": 30}  # words (Chinese: characters) of each fact the outline is shown


def digest(facts: list[Any], language: str) -> str:
    """The facts as the outline sees them: each cut to its first ``DIGEST_UNITS``. The outline plans sections, it
    quotes nothing; shown every fact whole (~1,200 tokens of the shipped notes), the embedded model's outline call
    ran past its 120 s read timeout three times (make run, 2026-12-07)."""
    zh = language == "zh"
    n = DIGEST_UNITS["zh" if zh else "en"]
    out = []
    for f in facts:
        s = f.statement
        cut = s[:n] if zh else " ".join(s.split()[:n])
        out.append(f"- {cut}{'' if cut == s else '…'}")
    return "\n".join(out)
