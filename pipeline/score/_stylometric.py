"""The stylometric score that preceded the token-probability scorer: a baseline, not a measure.

This is ``pipeline/scoring.py`` as of bfdcbf6: sentence-length variation, type/token ratio, stock
phrases and repeated n-grams weighted into 0-100. On the score corpus's test split it tells human
from machine text no better than a coin (``bench/bench_score.py`` prints both). It stays for two
jobs only: the baseline that bench compares against, and the scorer the test suite runs on, which
loads no model (in-process via ``scoring.using(StylometricScorer())``, in subprocesses by
``PIPELINE_SCORER=stylometric``). Its scores are stored with their own scorer name, so they never
mix with measured ones.
"""

from __future__ import annotations

import re
import statistics

from .scores import _CJK, _STOCK, _WORD, ParagraphScore, Score, detect_language, paragraphs_of

NAME = "stylometric/0 (baseline: not calibrated, not a measurement)"
THRESHOLD = 60.0  # the pass mark [humanize] threshold defaulted to with this scorer
WEIGHTS = {"sentence_variation": 0.30, "lexical_diversity": 0.25, "stock_phrases": 0.30, "repetition": 0.15}
_SENTENCE = re.compile(r"[^。！？!?.\n]+[。！？!?.]?")


def _clamp(x: float) -> float:
    return max(0.0, min(1.0, x))


def _units(text: str, language: str) -> list[str]:
    return _CJK.findall(text) if language == "zh" else [w.lower() for w in _WORD.findall(text)]


def _mattr(units: list[str], window: int) -> float:
    if not units:
        return 0.0
    if len(units) <= window:
        return len(set(units)) / len(units)
    ratios = [len(set(units[i:i + window])) / window for i in range(0, len(units) - window + 1, max(1, window // 5))]
    return statistics.fmean(ratios)


def components(text: str, language: str) -> dict[str, float]:
    body = re.sub(r"^#.*$", "", text, flags=re.MULTILINE)  # headings are not prose
    sentences = [s.strip() for s in _SENTENCE.findall(body) if len(s.strip()) > 1]
    lengths = [len(_units(s, language)) or len(s) for s in sentences]
    cv = statistics.pstdev(lengths) / statistics.fmean(lengths) if len(lengths) >= 2 and statistics.fmean(lengths) else 0.0
    units = _units(body, language)
    chars = max(1, len(re.sub(r"\s", "", body)))
    stock = len(_STOCK.findall(body)) * 1000 / chars
    n = 4 if language == "zh" else 3
    grams = [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]
    repeated = (len(grams) - len(set(grams))) / len(grams) if grams else 0.0
    return {
        "sentence_variation": round(_clamp((cv - 0.2) / 0.6), 4),
        "lexical_diversity": round(_clamp((_mattr(units, 100 if language == "zh" else 50) - 0.45) / 0.35), 4),
        "stock_phrases": round(_clamp(1 - stock / 4), 4),
        "repetition": round(_clamp(1 - 5 * repeated), 4),
    }


def total(text: str, language: str) -> float:
    return round(100 * sum(WEIGHTS[k] * v for k, v in components(text, language).items()), 1)


class StylometricScorer:
    """The baseline behind the scorer interface of ``pipeline.score.scoring``."""

    version = NAME

    def threshold(self, language: str) -> float:
        return THRESHOLD

    def score_paragraph(self, text: str, language: str) -> ParagraphScore:
        return ParagraphScore(0, total(text, language), False, len(_units(text, language)))

    def score(self, text: str, language: str | None = None) -> Score:
        language = language or detect_language(text)
        paragraphs = tuple(ParagraphScore(i, total(p, language), False, len(_units(p, language)))
                           for i, p in enumerate(paragraphs_of(text)))
        return Score(total(text, language), "scored", language, components(text, language), paragraphs, NAME,
                     THRESHOLD)
