"""``pipeline stats``: per-model reliability, computed from the ledger."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.views.stats import parse_since


def stats(path, *args):
    result = CliRunner().invoke(app, ["stats", "--config", str(path), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow  # five full runs
def test_stats_tell_the_models_apart(harness):
    for scenario in ("honest", "honest", "prose", "text_call", "silent"):
        harness.run(scenario)
    path = harness.dir / "config.toml"
    data = json.loads(stats(path, "--json").stdout)
    by = {m["model"]: m for m in data["models"]}
    assert list(by) == ["openai/honest", "openai/prose", "openai/silent", "openai/text_call"]  # most runs first

    honest = by["openai/honest"]
    assert honest["runs"] == 2 and honest["outcomes"] == {"done": 2} and honest["hallucinations_total"] == 0
    assert honest["nudges_per_run"] == 0 and honest["stuck_runs"] == 0
    assert honest["model_turns"] == 14 and honest["prose_only_turns"] == 2 and honest["prose_only_share"] == round(2 / 14, 3)
    assert honest["served"] == {"fake-honest-v1": 14}
    assert honest["latency_ms_p50"] is not None and honest["latency_ms_p95"] >= honest["latency_ms_p50"]
    assert honest["prompt_tokens"] > 0 and honest["completion_tokens"] > 0

    prose = by["openai/prose"]
    assert prose["outcomes"] == {"hallucination": 1} and prose["prose_only_share"] == 1.0 and prose["nudges_per_run"] == 2
    assert prose["hallucinations"]["publish"] == {"unbacked": 3} and prose["hallucinations"]["register"] == {"unbacked": 3}
    assert by["openai/text_call"]["text_tool_calls"] >= 1
    assert by["openai/silent"]["stuck_runs"] == 1 and by["openai/silent"]["outcomes"] == {"incomplete": 1}

    assert json.loads(stats(path, "--json", "--since", "2999-01-01").stdout)["models"] == []
    assert len(json.loads(stats(path, "--json", "--since", "1h").stdout)["models"]) == 4
    table = stats(path).stdout
    assert "openai/prose" in table and "publish unbacked 3" in table


def test_since_accepts_spans_and_dates():
    from datetime import datetime, timezone

    now = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
    assert parse_since("7d", now) == datetime(2026, 11, 23, 12, tzinfo=timezone.utc)
    assert parse_since("90m", now) == datetime(2026, 11, 30, 10, 30, tzinfo=timezone.utc)
    assert parse_since("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=timezone.utc)
