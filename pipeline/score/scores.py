"""What a humanize score is, and the text units it is computed over: shared by every scorer.

``pipeline.score.scoring`` (the calibrated token-probability scorer) and ``pipeline.score._stylometric`` (the
baseline the tests run on) both return these; neither imports the other's internals.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

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
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=[.;:])(?=\s)")


@dataclass(frozen=True)
class ParagraphScore:
    index: int
    score: float | None
    too_short: bool
    tokens: int


@dataclass(frozen=True)
class Score:
    total: float | None
    verdict: str                      # "scored" | "too_short"
    language: str
    components: dict[str, float]
    paragraphs: tuple[ParagraphScore, ...] = ()
    scorer: str = ""
    threshold: float = 0.0

    @property
    def passed(self) -> bool:
        return self.total is not None and self.total >= self.threshold

    def weakest(self, n: int = 1) -> list[ParagraphScore]:
        scored = [p for p in self.paragraphs if p.score is not None]
        return sorted(scored, key=lambda p: (p.score, p.index))[:n]

    def as_json(self) -> dict[str, Any]:
        return {"total": self.total, "verdict": self.verdict, "language": self.language,
                "threshold": self.threshold, "passed": self.passed, "components": self.components,
                "paragraphs": [asdict(p) for p in self.paragraphs], "scorer": self.scorer}


# --- text ---------------------------------------------------------------------------------------

def detect_language(text: str) -> str:
    """"zh" when Chinese characters outnumber Latin words (a Chinese text quoting English terms stays zh)."""
    return "zh" if len(_CJK.findall(text)) > len(_WORD.findall(text)) else "en"


def paragraphs_of(markdown: str) -> list[str]:
    """The body paragraphs of an article, in order: headings, fences and front matter are not prose."""
    body = re.sub(r"```.*?(```|\Z)", "\n\n", markdown, flags=re.DOTALL)
    out = []
    for block in re.split(r"\n\s*\n", body):
        lines = [ln.strip() for ln in block.strip().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if lines:
            out.append("\n".join(lines))
    return out


def sentences_of(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.replace("\n", " ")) if len(s.strip()) > 1]


def stock_phrases(text: str) -> list[str]:
    return list(dict.fromkeys(m.group(0) for m in _STOCK.finditer(text)))


def _sentence_units(sentence: str, language: str) -> int:
    return len(_CJK.findall(sentence)) if language == "zh" else len(_WORD.findall(sentence))
