"""Reports come from ledger rows only: per run, daily, to Markdown and chat webhooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date

import pytest

from pipeline.views.reports import daily_summary, render_daily, run_summary

from support import KEY_ENV, Recorder


def test_run_report_is_built_from_the_ledger_not_the_model(harness):
    outcome, ledger = harness.run("wrong_values")  # the model quotes a URL and number that do not exist
    summary = run_summary(ledger, outcome.run_id)
    facts = {f.capability: f.value for f in ledger.facts(outcome.run_id)}
    assert summary.url == facts["publish"] and summary.registration_no == facts["register"]
    assert "wrong-slug" not in json.dumps(summary.as_dict()) and summary.hallucinations_caught >= 2
    report_md = harness.dir / "var" / "reports" / f"run-{outcome.run_id}.md"
    assert report_md.exists() and facts["publish"] in report_md.read_text()


def test_daily_summary_counts_runs_publications_and_failures(harness):
    _ok, ledger = harness.run("honest")
    bad, _ = harness.run("prose")
    summary = daily_summary(ledger, date.today(), "UTC")
    assert summary.runs == 2 and summary.by_status == {"done": 1, "hallucination": 1}
    assert len(summary.publications) == 1 and len(summary.registrations) == 1
    assert [f.run_id for f in summary.failures] == [bad.run_id]
    assert summary.hallucinations_caught >= 3
    text = render_daily(summary)
    assert f"pipeline ledger diff --run {bad.run_id}" in text and "Publications: 1" in text


@pytest.mark.slow  # a CLI subprocess
def test_report_command_writes_markdown_and_posts_to_the_webhook(harness):
    rec = Recorder()
    try:
        extra = f'\n[report]\nwebhook_url = "{rec.base}/report"\nformat = "dingtalk"\n'
        harness.run("honest", extra)
        path = harness.dir / "config.toml"
        proc = subprocess.run([sys.executable, "-m", "pipeline", "report", "--json", "--send", "--config", str(path)],
                              capture_output=True, text=True, timeout=60, env={**os.environ, KEY_ENV: "x"})
    finally:
        rec.server.shutdown()
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["runs"] == 1 and len(data["publications"]) == 1
    assert any(p.endswith(".md") for p in data["delivered_to"]) and "webhook (dingtalk)" in data["delivered_to"]
    posted = [body for p, body in rec.hits if p == "/report"]
    assert posted[-1]["msgtype"] == "text" and "Daily report" in posted[-1]["text"]["content"]


@pytest.mark.slow  # a CLI subprocess
def test_report_bad_date_is_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipeline", "report", "--date", "yesterday"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "YYYY-MM-DD" in proc.stderr
