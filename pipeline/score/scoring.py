"""The humanize score: how human a text reads, measured from a language model's token probabilities.

The number is computed by the system, never by the model, from the scoring model's next-token
distribution at every position of the text (``pipeline.model.local.logprobs``):

=================  ==================================================================================
feature            what it measures (per predicted token, pooled over the text)
=================  ==================================================================================
curvature          Fast-DetectGPT's conditional probability curvature (Bao et al., ICLR 2024), the
                   analytic form with the scoring model as both sampling and scoring model:
                   (mean log p(x) - mean E[log p]) / sqrt(mean Var[log p]). Machine text sits near
                   the peak of the model's distribution (high), people's words less so.
log_ppl            mean negative log-likelihood (GPTZero's perplexity)
entropy            mean entropy of the model's distribution; log_ppl / entropy is Binoculars'
                   ratio (Hans et al., ICML 2024) with one model as observer and performer
log_rank           mean log-rank of the actual token (Solaiman et al.'s log-rank)
burstiness         spread (standard deviation) of per-sentence log-perplexity: people alternate
                   predictable and surprising sentences, models are even
stock_phrases      secondary: stock AI phrases per 1,000 characters ("delve", 值得注意的是 ...)
sentence_cv        secondary: coefficient of variation of sentence lengths
=================  ==================================================================================

A logistic regression per language (``pipeline/score/calibration/score.json``, fitted by
``bench/calibrate_score.py`` on the corpus's calibration split, never on its test split) turns the
standardised features into P(human); the score is 100 x that probability, with both classes given
equal weight. So 50 is "as likely a person's as a model's"; the pass mark is set by a rule on the
calibration split (90 % of human passages pass), not to let any model's output through.

Each paragraph is scored as its own sequence, so a paragraph's score depends only on its text (a
rewrite of one paragraph changes only that paragraph's score); the article's total pools every
paragraph's tokens. Same text, same install: same score.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from .scores import (  # noqa: F401  (re-exported: the scorer's API)
    _CJK,
    _SENTENCE_END,
    _STOCK,
    _WORD,
    STOCK_PHRASES,
    ParagraphScore,
    Score,
    _sentence_units,
    detect_language,
    paragraphs_of,
    sentences_of,
    stock_phrases,
)

METHOD = "fdg-lr"          # Fast-DetectGPT curvature + perplexity features, logistic calibration
# 2: a paragraph past 128 tokens is read in windows (logprobs.windows) instead of whole; calibrated again on that.
METHOD_VERSION = 2
FEATURES = ("curvature", "log_ppl", "entropy", "log_rank", "burstiness", "stock_phrases", "sentence_cv")
# Below these many predicted tokens a number would be noise: the verdict is too_short instead. A
# paragraph's floor is measured per language (calibration file: where paragraph scores start to tell
# people from models); this one applies to a calibration that predates the measurement.
MIN_TOKENS_TOTAL = 60
MIN_TOKENS_PARAGRAPH = 20


# --- the model's view of a text -----------------------------------------------------------------

@dataclass
class Pooled:
    """Token statistics of one or more paragraphs, and each sentence's log-perplexity."""

    n: int = 0
    ll: float = 0.0
    mean: float = 0.0
    var: float = 0.0
    logrank: float = 0.0
    sentence_ppl: list[float] = field(default_factory=list)
    chars: int = 0
    stock: int = 0
    sentence_lengths: list[int] = field(default_factory=list)

    def add(self, other: Pooled) -> None:
        self.n += other.n
        self.ll += other.ll
        self.mean += other.mean
        self.var += other.var
        self.logrank += other.logrank
        self.sentence_ppl += other.sentence_ppl
        self.chars += other.chars
        self.stock += other.stock
        self.sentence_lengths += other.sentence_lengths

    def features(self) -> dict[str, float]:
        n = max(self.n, 1)
        log_ppl, entropy = -self.ll / n, -self.mean / n
        lengths = self.sentence_lengths
        cv = statistics.pstdev(lengths) / statistics.fmean(lengths) if len(lengths) >= 2 and any(lengths) else 0.0
        return {
            "curvature": (self.ll - self.mean) / n / math.sqrt(max(self.var / n, 1e-9)),
            "log_ppl": log_ppl,
            "entropy": entropy,
            "log_rank": self.logrank / n,
            "burstiness": statistics.pstdev(self.sentence_ppl) if len(self.sentence_ppl) >= 2 else 0.0,
            "stock_phrases": self.stock * 1000 / max(self.chars, 1),
            "sentence_cv": cv,
        }


def pool_paragraph(text: str, stats: Any, language: str) -> Pooled:
    """One paragraph's sums, from its per-token statistics (``logprobs.TokenStats``)."""
    encoded_ends, at = [], 0
    for sentence in _SENTENCE_END.split(text):
        at += len(sentence.encode("utf-8"))
        if sentence.strip():
            encoded_ends.append((at, sentence))
    sentence_ppl, lengths, start = [], [], 0
    ends = list(stats.end)
    ll = list(stats.ll)
    for end, sentence in encoded_ends:
        idx = [i for i in range(start, len(ends)) if ends[i] <= end]
        if idx:
            start = idx[-1] + 1
            if len(idx) >= 5:  # a sentence of a few tokens says nothing about burstiness
                sentence_ppl.append(-sum(ll[i] for i in idx) / len(idx))
        units = _sentence_units(sentence, language)
        if units > 1:
            lengths.append(units)
    return Pooled(n=stats.n, ll=float(stats.ll.sum()), mean=float(stats.mean.sum()), var=float(stats.var.sum()),
                  logrank=float(stats.logrank.sum()), sentence_ppl=sentence_ppl,
                  chars=len(re.sub(r"\s", "", text)), stock=len(_STOCK.findall(text)), sentence_lengths=lengths)


# --- calibration --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Calibration:
    language: str
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    min_tokens_paragraph: int = MIN_TOKENS_PARAGRAPH

    def probability(self, features: dict[str, float]) -> float:
        z = self.intercept + sum(c * (features[f] - m) / s
                                 for f, m, s, c in zip(FEATURES, self.mean, self.scale, self.coef, strict=True))
        return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))


def calibration_file() -> Any:
    return resources.files("pipeline.score") / "calibration" / "score.json"


@dataclass(frozen=True)
class CalibrationSet:
    model_sha256: str
    model_file: str
    digest: str
    languages: dict[str, Calibration]


_calibrations: CalibrationSet | None = None


def calibrations() -> CalibrationSet:
    global _calibrations
    if _calibrations is None:
        raw = calibration_file().read_bytes()
        data = json.loads(raw)
        if tuple(data["features"]) != FEATURES or data["method_version"] != METHOD_VERSION:
            raise ConfigError("scoring: pipeline/score/calibration/score.json was fitted for other features; "
                              "refit it with bench/calibrate_score.py")
        langs = {lang: Calibration(lang, tuple(c["mean"]), tuple(c["scale"]), tuple(c["coef"]),
                                   float(c["intercept"]), float(c["threshold"]),
                                   int(c.get("min_tokens_paragraph", MIN_TOKENS_PARAGRAPH)))
                 for lang, c in data["languages"].items()}
        _calibrations = CalibrationSet(data["model_sha256"], data["model_file"],
                                       hashlib.sha256(raw).hexdigest()[:8], langs)
    return _calibrations


def threshold_for(language: str) -> float:
    """The calibrated pass mark of ``language`` (the rule is in the calibration file and the README)."""
    return calibrations().languages[language].threshold


# --- scorers ------------------------------------------------------------------------------------

class Scorer(Protocol):
    @property
    def version(self) -> str: ...

    def threshold(self, language: str) -> float: ...
    def score(self, text: str, language: str | None = None) -> Score: ...
    def score_paragraph(self, text: str, language: str) -> ParagraphScore: ...


class ModelScorer:
    """The calibrated scorer on the local scoring model (loaded on the first score, once per process)."""

    def __init__(self, data_dir: Path | str = "var", model_path: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.model_path = Path(model_path) if model_path else None
        self._model: Any = None
        self._cache: dict[tuple[str, str], Pooled] = {}
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        cal = calibrations()
        return f"{METHOD}/{METHOD_VERSION} {cal.model_file} sha256:{cal.model_sha256[:12]} cal:{cal.digest}"

    def threshold(self, language: str) -> float:
        return threshold_for(language)

    def model(self) -> Any:
        if self._model is None:
            from ..model.local import assets, logprobs

            cal = calibrations()
            if self.model_path is not None:
                if not self.model_path.is_file():
                    raise ConfigError(f"scoring model: {self.model_path} does not exist")
                sha = logprobs.file_sha256(self.model_path)
                if sha != cal.model_sha256:
                    raise ConfigError(f"scoring model: {self.model_path} has sha256 {sha[:16]}…, but the score is "
                                      f"calibrated on {cal.model_file} ({cal.model_sha256[:16]}…); refusing to score "
                                      f"with a model it was not calibrated on")
                path = self.model_path
            else:
                if assets.SCORER.sha256 != cal.model_sha256:
                    raise ConfigError("scoring model: the calibration does not match the shipped scoring model")
                path = assets.model_path(self.data_dir, assets.SCORER)
            self._model = logprobs.scoring_model(path, cal.model_sha256)
        return self._model

    def _pooled(self, text: str, language: str) -> Pooled:
        key = (language, text)
        with self._lock:
            if key not in self._cache:
                self._cache[key] = pool_paragraph(text, self.model().stats(text), language)
            return self._cache[key]

    def _prefetch(self, texts: list[str], language: str) -> None:
        """Score the paragraphs not scored yet in one model pass (see logprobs.ScoringModel.stats_many)."""
        model = self.model()
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if (language, t) not in self._cache))
        if len(todo) < 2 or not hasattr(model, "stats_many"):
            return
        pooled = [pool_paragraph(t, st, language) for t, st in zip(todo, model.stats_many(todo), strict=True)]
        with self._lock:
            for t, p in zip(todo, pooled, strict=True):
                self._cache.setdefault((language, t), p)

    def _value(self, pooled: Pooled, language: str, minimum: int) -> float | None:
        if pooled.n < minimum:
            return None
        return round(100 * calibrations().languages[language].probability(pooled.features()), 1)

    def score_paragraph(self, text: str, language: str) -> ParagraphScore:
        return self._paragraph(0, text, language)

    def _paragraph(self, index: int, text: str, language: str) -> ParagraphScore:
        pooled = self._pooled(text, language)
        value = self._value(pooled, language, calibrations().languages[language].min_tokens_paragraph)
        return ParagraphScore(index, value, value is None, pooled.n)

    def score(self, text: str, language: str | None = None) -> Score:
        language = language or detect_language(text)
        total = Pooled()
        paragraphs = []
        texts = paragraphs_of(text)
        self._prefetch(list(texts), language)
        for i, para in enumerate(texts):
            paragraphs.append(self._paragraph(i, para, language))
            total.add(self._pooled(para, language))
        value = self._value(total, language, MIN_TOKENS_TOTAL)
        components = {k: round(v, 4) for k, v in total.features().items()}
        return Score(value, "too_short" if value is None else "scored", language, components, tuple(paragraphs),
                     self.version, threshold_for(language))


_scorer: Scorer | None = None


def configure(data_dir: Path | str = "var", model_path: Path | str | None = None) -> None:
    """Where the scoring model is assembled (``[daemon] state_dir``) or found (``[humanize] scoring_model``)."""
    global _scorer
    if _scorer is not None and not isinstance(_scorer, ModelScorer):
        return  # a scorer injected with using() stays for the block
    if not isinstance(_scorer, ModelScorer) or _scorer.data_dir != Path(data_dir) or _scorer.model_path != (
            Path(model_path) if model_path else None):
        _scorer = ModelScorer(data_dir, model_path)


def current() -> Scorer:
    global _scorer
    if _scorer is not None and not isinstance(_scorer, ModelScorer):
        return _scorer  # injected with using() / set_scorer()
    if os.environ.get("PIPELINE_SCORER") == "stylometric":  # the test suite's subprocesses: no model load
        from ._stylometric import StylometricScorer

        return StylometricScorer()
    if _scorer is None:
        _scorer = ModelScorer()
    return _scorer


def set_scorer(scorer: Scorer | None) -> None:
    """Score with ``scorer`` from now on (None: the model scorer again)."""
    global _scorer
    _scorer = scorer


@contextlib.contextmanager
def using(scorer: Scorer) -> Iterator[Scorer]:
    """Score with ``scorer`` inside the block (tests inject one instead of loading the model)."""
    global _scorer
    before, _scorer = _scorer, scorer
    try:
        yield scorer
    finally:
        _scorer = before


def score(text: str, language: str | None = None) -> Score:
    return current().score(text, language)


def score_paragraph(text: str, language: str) -> ParagraphScore:
    return current().score_paragraph(text, language)


# --- what the editor and the model are told -----------------------------------------------------

def weakest_quoted(text: str, measured: Score, n: int = 2, width: int = 160) -> list[str]:
    paras = paragraphs_of(text)
    out = []
    for p in measured.weakest(n):
        body = paras[p.index] if p.index < len(paras) else ""
        quote = body if len(body) <= width else body[:width].rsplit(" ", 1)[0] + " …"
        out.append(f"paragraph {p.index + 1} ({p.score:g}): \"{quote}\"")
    return out


def weakest_stored(body: str, paragraphs_json: str | None, n: int = 2) -> list[str]:
    """The weakest paragraphs of a stored article, quoted from its stored per-paragraph scores (no model)."""
    if not paragraphs_json:
        return []
    paragraphs = tuple(ParagraphScore(**p) for p in json.loads(paragraphs_json))
    return weakest_quoted(body, Score(None, "scored", "", {}, paragraphs), n)


def signals(paragraph: str, language: str, scorer: str | None = None) -> list[str]:
    """What the score measures in one paragraph, where it reads like a model's: over-used phrases, flat sentence
    rhythm, low surprisal, each against the calibration split's human passages (their quartiles, recorded with the
    scorer's validity: pipeline/score/calibration/validity.json). What a rewrite can aim at, not a second score."""
    from . import lexical, validity

    ref = validity.human_reference(scorer or current().version, language)
    out = []
    found = list(dict.fromkeys([*stock_phrases(paragraph), *lexical.overused_found(paragraph, language)]))
    if found:
        out.append("over-used phrases: " + ", ".join(f'"{p}"' for p in found[:6]))
    lengths = [n for n in (_sentence_units(s, language) for s in sentences_of(paragraph)) if n > 1]
    if len(lengths) >= 3 and "sentence_cv" in ref:
        cv = statistics.pstdev(lengths) / statistics.fmean(lengths)
        if cv < ref["sentence_cv"]["p25"]:
            out.append(f"flat sentence rhythm (length variation {cv:.2f}; people's median "
                       f"{ref['sentence_cv']['median']:.2f})")
    model = _scorer if isinstance(_scorer, ModelScorer) else None  # the paragraph's statistics, if it was scored here
    pooled = model._cache.get((language, paragraph)) if model is not None else None
    if pooled is not None and pooled.n and "log_ppl" in ref:
        surprisal = pooled.features()["log_ppl"]
        if surprisal < ref["log_ppl"]["p25"]:
            out.append(f"predictable wording (surprisal {surprisal:.2f} nats a token; people's median "
                       f"{ref['log_ppl']['median']:.2f})")
    return out


def feedback(text: str, measured: Score, threshold: float) -> str:
    """What the scorer measured, as an instruction for the next rewrite: the weakest paragraphs, quoted, each with
    what reads like a model's in it (``signals``)."""
    total = "too short to score" if measured.total is None else f"{measured.total:g}"
    lines = [f"Your previous rewrite scored {total}; publishing needs {threshold:g}. "
             f"The paragraphs that read most like a model's:"]
    paras = paragraphs_of(text)
    for p, q in zip(measured.weakest(2), weakest_quoted(text, measured), strict=False):
        found = (signals(paras[p.index], measured.language or detect_language(text), measured.scorer)
                 if p.index < len(paras) else [])
        lines.append(f"- {q}" + (f" ({'; '.join(found)})" if found else ""))
    found = stock_phrases(text)
    if found:
        lines.append("- stock phrases found: " + ", ".join(f'"{p}"' for p in found[:8]) + ". Remove every one.")
    lines.append("Rewrite those paragraphs in your own concrete words: specific details, uneven rhythm, "
                 "no filler. Do not repeat your previous version.")
    return "\n".join(lines)
