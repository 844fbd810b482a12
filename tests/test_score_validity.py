"""What a humanize score was validated on, and "unvalidated for <model>" wherever it is shown for another writer."""

from __future__ import annotations

import json

import pytest

from pipeline.score import scoring, validity
from pipeline.score.validity import family_of


@pytest.mark.parametrize(("model", "family"), [
    ("local/qwen2.5-coder-1.5b", "qwen"), ("local-raw/qwen2.5-coder-1.5b", "qwen"), ("ollama/qwen2.5:7b", "qwen"),
    ("anthropic/claude-3-5-sonnet-20241022", "anthropic"), ("claude-session", "anthropic"),
    ("openai/gpt-4o-mini", "openai"), ("gpt-4o", "openai"), ("openai/o3-mini", "openai"),
    ("deepseek/deepseek-chat", "deepseek"), ("gemini/gemini-1.5-pro", "gemini"), ("gemma-3-270m", "gemma"),
    ("smollm2-135m", "smollm"), ("ollama/llama3.1:8b", "llama"), ("mistral/mistral-large-latest", "mistral"),
    ("some-new-model", None), ("", None), (None, None),
])
def test_a_model_name_has_a_family(model, family):
    assert family_of(model) == family


@pytest.fixture
def record(monkeypatch):
    entry = {"languages": {"en": {"threshold": 94.0, "families": {
        "qwen": {"validated": True, "auc": 1.0, "tpr_at_5fpr": 1.0, "passages": 40, "fails_in": [], "registers": {}},
        "anthropic": {"validated": False, "auc": 0.41, "tpr_at_5fpr": 0.02, "passages": 42, "fails_in": ["human"],
                      "registers": {}},
    }}}}
    monkeypatch.setattr(validity, "_entries", {"abcdef12": entry})
    return "fdg-lr/2 model.gguf sha256:1d9614638d18 cal:abcdef12"


def test_a_validated_writer_gets_no_note(record):
    v = validity.validity(record, "en", "local/qwen2.5-coder-1.5b")
    assert v.status == "validated" and v.label == "" and v.validated_on == ("qwen",) and v.failed_on == ("anthropic",)


def test_a_writer_measured_and_failed_is_unvalidated_with_its_figure(record):
    v = validity.validity(record, "en", "anthropic/claude-3-5-sonnet")
    assert v.status == "unvalidated"
    assert v.label.startswith("unvalidated for anthropic/claude-3-5-sonnet") and "AUC 0.41" in v.label


def test_a_writer_never_measured_is_unvalidated(record):
    v = validity.validity(record, "en", "openai/gpt-4o")
    assert v.status == "unvalidated" and "unvalidated for openai/gpt-4o" in v.label and "never measured" in v.label


def test_a_language_or_scorer_without_a_record_is_never_validated(record):
    assert validity.validity(record, "zh", "local/qwen2.5-coder-1.5b").status == "unvalidated"
    other = record.replace("abcdef12", "00000000")
    assert validity.validity(other, "en", "local/qwen2.5-coder-1.5b").status == "unvalidated"
    base = validity.validity("stylometric/0 (baseline: not calibrated, not a measurement)", "en", "local/qwen2.5")
    assert base.status == "unvalidated" and "baseline" in base.label


def test_without_a_writer_it_says_what_it_was_validated_on(record):
    v = validity.validity(record, "en", None)
    assert v.status == "unknown" and v.validated_on == ("qwen",) and "validated on qwen" in v.label


def test_the_shipped_calibration_has_a_validity_record():
    """A calibration shipped without its measured validity would print every score as unvalidated: refit both
    (bench/calibrate_score.py, then bench/score_lofo.py --write-validity)."""
    validity._entries = None
    digest = scoring.calibrations().digest
    entry = validity.entries()[digest]
    for lang in scoring.calibrations().languages:
        families = entry["languages"][lang]["families"]
        assert "qwen" in families and "anthropic" in families
        for figures in families.values():
            assert figures["validated"] == (figures["auc"] >= validity.BAR and figures["tpr_at_5fpr"] >= validity.TPR_BAR
                                            and figures["passages"] >= validity.MIN_PASSAGES and not figures["fails_in"])


def test_the_report_says_unvalidated_beside_the_number(record):
    from pipeline.views.reports import RunSummary, render_run

    v = validity.validity(record, "en", "openai/gpt-4o")
    summary = RunSummary("r1", "blog", "done", "t", "T", 97.5, None, None, 0, 0, record, "openai/gpt-4o", v.status,
                         v.validated_on, v.label)
    body = render_run(summary)
    assert "- Humanize score: 97.5 (unvalidated for openai/gpt-4o" in body
    ok = validity.validity(record, "en", "local/qwen2.5-coder-1.5b")
    plain = RunSummary("r1", "blog", "done", "t", "T", 97.5, None, None, 0, 0, record, "local/qwen2.5-coder-1.5b",
                       ok.status, ok.validated_on, ok.label)
    assert "- Humanize score: 97.5\n" in render_run(plain)


def test_run_summary_reads_validity_from_the_article_and_the_run(tmp_path, record):
    from pipeline.ledger.models import Article
    from pipeline.ledger.writer import Ledger
    from pipeline.views.reports import run_summary

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    run = ledger.start_run(model="deepseek/deepseek-chat")
    with ledger.write() as s:
        s.add(Article(run_id=run.id, kind="humanized", title="T", body="b", language="en", content_hash="x",
                      score=99.0, scorer=record, score_paragraphs_json=json.dumps([])))
    summary = run_summary(ledger, run.id)
    ledger.close()
    assert summary.writer == "deepseek/deepseek-chat" and summary.score_validity == "unvalidated"
    assert summary.validated_on == ("qwen",) and summary.score_note.startswith("unvalidated for deepseek/deepseek-chat")
    assert summary.as_dict()["score_note"] == summary.score_note
