"""The human-likeness score: deterministic, computed by the system, never by the model.

Same text in, same score out, so any score in the ledger can be recomputed
from the stored article. Four components, each 0..1, weighted into 0..100:

=====================  ======  ==============================================
component              weight  what it measures
=====================  ======  ==============================================
sentence_variation     0.30    coefficient of variation (CV) of sentence
                               lengths (words for English, characters for
                               Chinese); people mix short and long sentences,
                               models write even ones. 0 at CV <= 0.2, 1.0 at
                               CV >= 0.8.
lexical_diversity      0.25    moving-average type/token ratio (window 50
                               words, or 100 characters for Chinese); 0 at
                               0.45, 1.0 at 0.80.
stock_phrases          0.30    1 − (stock AI phrases per 1,000 characters)/4,
                               floored at 0 ("delve", "in conclusion",
                               "it is worth noting", 总而言之, 值得注意的是 …).
repetition             0.15    1 − 5 × share of repeated word 3-grams
                               (character 4-grams for Chinese), floored at 0.
=====================  ======  ==============================================
"""

from __future__ import annotations

import contextlib
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

WEIGHTS = {"sentence_variation": 0.30, "lexical_diversity": 0.25, "stock_phrases": 0.30, "repetition": 0.15}

STOCK_PHRASES = [
    "delve", "delves", "delving", "in conclusion", "in summary", "it is worth noting", "it's worth noting",
    "it is important to note", "in today's fast-paced", "in the ever-evolving", "ever-evolving landscape",
    "tapestry", "testament to", "navigate the complexities", "unlock the potential", "game-changer",
    "a myriad of", "plays a crucial role", "plays a vital role", "furthermore", "moreover", "additionally",
    "embark on", "harness the power", "seamlessly", "robust", "leverage", "at the end of the day",
    "总而言之", "总之", "综上所述", "值得注意的是", "需要注意的是", "不可忽视", "至关重要", "毋庸置疑",
    "在当今", "随着.{0,8}的(快速|不断)发展", "首先.{0,40}其次", "赋能", "助力",
]
_STOCK = re.compile("|".join(f"(?:{p})" for p in STOCK_PHRASES), re.IGNORECASE)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE = re.compile(r"[^。！？!?.\n]+[。！？!?.]?")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")


@dataclass(frozen=True)
class ParagraphScore:
    index: int                 # position among the article's body paragraphs (headings excluded)
    score: float | None        # 0-100 human-likeness; None when too_short
    too_short: bool
    tokens: int


@dataclass(frozen=True)
class Score:
    total: float | None        # 0-100; None when too_short
    verdict: str               # "scored" | "too_short"
    language: str              # "en" | "zh"
    components: dict[str, float]
    paragraphs: tuple[ParagraphScore, ...] = ()
    scorer: str = "heuristic/1"
    threshold: float = 50.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def _clamp(x: float) -> float:
    return max(0.0, min(1.0, x))


def detect_language(text: str) -> str:
    letters = len(_WORD.findall(text))
    return "zh" if len(_CJK.findall(text)) > letters else "en"


def _units(text: str, language: str) -> list[str]:
    return _CJK.findall(text) if language == "zh" else [w.lower() for w in _WORD.findall(text)]


def _mattr(units: list[str], window: int) -> float:
    if not units:
        return 0.0
    if len(units) <= window:
        return len(set(units)) / len(units)
    ratios = [len(set(units[i:i + window])) / window for i in range(0, len(units) - window + 1, max(1, window // 5))]
    return statistics.fmean(ratios)


@dataclass(frozen=True)
class Measurements:
    """What the components are computed from, kept so a retry can be told what to change."""

    language: str
    sentence_lengths: list[int]
    cv: float
    mattr: float
    stock_found: list[str]
    stock_per_1000: float
    repeated_share: float
    repeated_grams: list[str]


def measure(text: str, language: str | None = None) -> Measurements:
    language = language or detect_language(text)
    body = re.sub(r"^#.*$", "", text, flags=re.MULTILINE)  # headings are not prose
    sentences = [s.strip() for s in _SENTENCE.findall(body) if len(s.strip()) > 1]
    lengths = [len(_units(s, language)) or len(s) for s in sentences]
    cv = statistics.pstdev(lengths) / statistics.fmean(lengths) if len(lengths) >= 2 and statistics.fmean(lengths) else 0.0
    units = _units(body, language)
    mattr = _mattr(units, 100 if language == "zh" else 50)
    chars = max(1, len(re.sub(r"\s", "", body)))
    found = [m.group(0) for m in _STOCK.finditer(body)]
    n = 4 if language == "zh" else 3
    grams = [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]
    repeated = (len(grams) - len(set(grams))) / len(grams) if grams else 0.0
    counts: dict[tuple, int] = {}
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    joiner = "" if language == "zh" else " "
    top = [joiner.join(g) for g, c in sorted(counts.items(), key=lambda kv: -kv[1]) if c > 1][:3]
    return Measurements(language, lengths, cv, mattr, list(dict.fromkeys(found)), len(found) * 1000 / chars, repeated, top)


def _heuristic(text: str, language: str | None = None) -> tuple[float, dict[str, float], str]:
    m = measure(text, language)
    language, cv, mattr, stock, repeated = m.language, m.cv, m.mattr, m.stock_per_1000, m.repeated_share
    components = {
        "sentence_variation": round(_clamp((cv - 0.2) / 0.6), 4),
        "lexical_diversity": round(_clamp((mattr - 0.45) / 0.35), 4),
        "stock_phrases": round(_clamp(1 - stock / 4), 4),
        "repetition": round(_clamp(1 - 5 * repeated), 4),
    }
    total = round(100 * sum(WEIGHTS[k] * v for k, v in components.items()), 1)
    return total, components, language


# --- the scorer API (issue 21) over the heuristic above --------------------------------------
# An adapter: the token-probability scorer replaces it; nothing outside this module depends on the
# heuristic's internals, only on score / score_paragraph / paragraphs_of / using.

TOO_SHORT_ARTICLE = {"en": 20, "zh": 40}     # words / characters: below this a total means nothing
TOO_SHORT_PARAGRAPH = {"en": 12, "zh": 25}


def _size(text: str, language: str) -> int:
    return len(_CJK.findall(text)) if language == "zh" else len(_WORD.findall(text))


def paragraphs_of(markdown: str) -> list[str]:
    """Body paragraphs in order: headings, code fences and blank lines split them."""
    out: list[str] = []
    fenced = False
    chunk: list[str] = []
    for line in markdown.splitlines() + [""]:
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            if chunk:
                out.append("\n".join(chunk).strip())
                chunk = []
            continue
        if fenced:
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            if chunk:
                out.append("\n".join(chunk).strip())
                chunk = []
            continue
        chunk.append(line)
    return [p for p in out if p]


class _Heuristic:
    name = "heuristic/1"

    def score_paragraph(self, text: str, language: str, index: int = 0) -> ParagraphScore:
        n = _size(text, language)
        if n < TOO_SHORT_PARAGRAPH.get(language, 12):
            return ParagraphScore(index, None, True, n)
        return ParagraphScore(index, _heuristic(text, language)[0], False, n)

    def score(self, text: str, language: str | None = None) -> Score:
        language = language or detect_language(text)
        paragraphs = tuple(self.score_paragraph(p, language, i) for i, p in enumerate(paragraphs_of(text)))
        total, components, language = _heuristic(text, language)
        if _size(text, language) < TOO_SHORT_ARTICLE.get(language, 30):
            return Score(None, "too_short", language, components, paragraphs, self.name)
        return Score(total, "scored", language, components, paragraphs, self.name)


class Scorer(Protocol):
    def score(self, text: str, language: str | None = None) -> Score: ...

    def score_paragraph(self, text: str, language: str) -> ParagraphScore: ...


_active: Any = _Heuristic()


def set_scorer(scorer: Any) -> None:
    """Make ``scorer`` (``.score``/``.score_paragraph``) the process's scorer; ``None`` restores the default."""
    global _active
    _active = scorer if scorer is not None else _Heuristic()


@contextlib.contextmanager
def using(scorer: Any) -> Iterator[Any]:
    """``with scoring.using(fake): ...``: the scorer for the block (tests inject one; no model is loaded)."""
    previous = _active
    set_scorer(scorer)
    try:
        yield scorer
    finally:
        set_scorer(previous)


def score(text: str, language: str | None = None) -> Score:
    """The whole article's score (see the module docstring)."""
    return _active.score(text, language)


def score_paragraph(text: str, language: str) -> ParagraphScore:
    """One paragraph alone: its score depends only on its own text."""
    return _active.score_paragraph(text, language)


# Below this a component is worth naming to the model: it costs the most points.
WEAK = 0.7


def feedback(text: str, measured: Score, threshold: float) -> str:
    """What the scorer measured, as an instruction for the next rewrite (weak components only, values quoted)."""
    m = measure(text, measured.language)
    c = measured.components
    unit = "characters" if m.language == "zh" else "words"
    lines = [f"Your previous rewrite scored {measured.total:g}; publishing needs {threshold:g}. The scorer measured:"]
    if c["sentence_variation"] < WEAK:
        lo, hi = (min(m.sentence_lengths), max(m.sentence_lengths)) if m.sentence_lengths else (0, 0)
        lines.append(f"- sentence lengths barely vary ({lo}-{hi} {unit}, variation {m.cv:.2f}): "
                     f"write some very short sentences and some long ones.")
    if c["stock_phrases"] < 1.0 and m.stock_found:
        quoted = ", ".join(f'"{p}"' for p in m.stock_found[:8])
        lines.append(f"- stock phrases found: {quoted}. Remove every one of them.")
    if c["repetition"] < WEAK and m.repeated_grams:
        quoted = ", ".join(f'"{g}"' for g in m.repeated_grams)
        lines.append(f"- repeated phrases: {quoted}. Say each thing once.")
    if c["lexical_diversity"] < WEAK:
        lines.append(f"- the vocabulary is repetitive (type/token ratio {m.mattr:.2f}): use more varied, concrete words.")
    if len(lines) == 1:
        lines.append("- every component is middling: make the sentences more varied and concrete.")
    lines.append("Rewrite the article again from the original below; do not repeat your previous version.")
    return "\n".join(lines)
