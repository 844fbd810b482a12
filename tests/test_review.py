"""The editor's approval gate: awaiting_review (exit 8), approve / reject, exactly once, races and crashes; --dry-run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from pipeline.errors import ConfigError
from pipeline.ledger.models import Execution, Publication, Registration, Report, Review, Run
from pipeline.publishing import review
from pipeline.views.status import channel_status

from support import KEY_ENV

MANUAL = '[publish]\nreview = "manual"\npreview_dir = "preview"\n'
REPO = Path(__file__).resolve().parent.parent


def held(harness):
    """A run of the honest scenario that stops for review: (outcome, cfg, ledger)."""
    outcome, ledger = harness.run("honest", MANUAL)
    return outcome, harness.config("honest", MANUAL), ledger


def counts(ledger) -> dict[str, int]:
    with ledger.read() as s:
        return {"publications": len(s.exec(select(Publication)).all()),
                "verified": len(s.exec(select(Publication).where(Publication.status == "verified")).all()),
                "registrations": len(s.exec(select(Registration)).all()),
                "reports": len(s.exec(select(Report)).all())}


def cli(harness, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # With PIPELINE_FAULT set, the CLI runs with that crash point armed (tests/faults.py).
    entry = [str(REPO / "tests" / "faults.py")] if "PIPELINE_FAULT" in (env or {}) else ["-m", "pipeline"]
    return subprocess.run([sys.executable, *entry, *args, "--config", str(harness.dir / "config.toml")],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, KEY_ENV: "sk-test-not-a-real-key", **(env or {})})


def test_manual_review_holds_the_run_with_a_preview_and_status_shows_it(harness):
    outcome, cfg, ledger = held(harness)
    assert (outcome.status, outcome.exit_code) == ("awaiting_review", 8)
    assert "pipeline review approve" in outcome.error and "preview" in outcome.error
    [pending] = review.pending(ledger)
    assert pending.run_id == outcome.run_id and pending.status == "pending"
    assert Path(pending.preview).exists() and "<h1>" in Path(pending.preview).read_text(encoding="utf-8")
    assert counts(ledger) == {"publications": 0, "verified": 0, "registrations": 0, "reports": 0}
    assert not harness.pages  # nothing on the site
    [row] = channel_status(cfg)
    assert row.last_status == "awaiting_review" and not row.failed
    assert [r.run_id for r in row.awaiting_review] == [outcome.run_id]


def test_approve_publishes_registers_and_reports_once_with_the_approver_in_the_ledger(harness):
    outcome, cfg, ledger = held(harness)
    view, now = review.approve(cfg.run_settings(), ledger, outcome.run_id, "alice")
    assert now and view.status == "approved" and view.completed and view.decided_by == "alice" and view.url
    assert counts(ledger) == {"publications": 1, "verified": 1, "registrations": 1, "reports": 1}
    with ledger.read() as s:
        run = s.get(Run, outcome.run_id)
        calls = s.exec(select(Execution).where(Execution.run_id == outcome.run_id,
                                               Execution.call_id == "review:alice")).all()
    assert (run.status, run.exit_code) == ("done", 0)
    assert [(c.capability, c.ok) for c in calls] == [("publish", True), ("register", True), ("report", True)]
    assert {f.capability for f in ledger.facts(outcome.run_id)} >= {"publish", "register", "report"}
    assert review.pending(ledger) == []
    # Approving twice: nothing more happens, and the first approver stays on record.
    again, now = review.approve(cfg.run_settings(), ledger, outcome.run_id, "bob")
    assert not now and again.decided_by == "alice"
    assert counts(ledger) == {"publications": 1, "verified": 1, "registrations": 1, "reports": 1}


def test_reject_closes_it_and_nothing_is_published(harness):
    outcome, cfg, ledger = held(harness)
    with pytest.raises(ConfigError, match="--reason"):
        review.reject(cfg.run_settings(), ledger, outcome.run_id, "carol", " ")
    view = review.reject(cfg.run_settings(), ledger, outcome.run_id, "carol", "off-topic for this channel")
    assert (view.status, view.decided_by, view.reason) == ("rejected", "carol", "off-topic for this channel")
    with ledger.read() as s:
        assert s.get(Run, outcome.run_id).status == "rejected"
    with pytest.raises(ConfigError, match="rejected by carol"):
        review.approve(cfg.run_settings(), ledger, outcome.run_id, "alice")
    with pytest.raises(ConfigError, match="only a pending review"):
        review.reject(cfg.run_settings(), ledger, outcome.run_id, "dave", "again")
    assert counts(ledger)["publications"] == 0 and review.pending(ledger) == []


def test_an_approval_recorded_elsewhere_is_not_overwritten(harness):
    """Another host on a shared database approved first: the conditional update keeps that approver."""
    outcome, cfg, ledger = held(harness)
    with ledger.write() as s:
        row = s.exec(select(Review)).one()
        row.status, row.decided_by = "approved", "erin"
        s.add(row)
    view, _ = review.approve(cfg.run_settings(), ledger, outcome.run_id, "frank")
    assert view.decided_by == "erin" and view.completed and counts(ledger)["verified"] == 1


@pytest.mark.slow  # CLI subprocesses
def test_two_approvers_racing_publish_once(harness):
    outcome, _cfg, ledger = held(harness)
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline", "review", "approve", outcome.run_id, "--by", who,
                               "--config", str(harness.dir / "config.toml")], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, KEY_ENV: "sk-test-not-a-real-key"})
             for who in ("alice", "bob")]
    results = [(p.wait(timeout=120), p.stdout.read() + p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert set(codes) <= {0, 75} and codes[0] == 0, results  # the loser was locked out or found it done
    assert counts(ledger) == {"publications": 1, "verified": 1, "registrations": 1, "reports": 1}
    assert review.show(ledger, outcome.run_id).decided_by in ("alice", "bob")


@pytest.mark.slow  # CLI subprocesses
@pytest.mark.parametrize("fault", ["crash_after_approval", "crash_after_platform_call"])
def test_a_crash_during_approval_is_finished_by_approving_again(harness, fault):
    outcome, _cfg, ledger = held(harness)
    crashed = cli(harness, "review", "approve", outcome.run_id, "--by", "alice", env={"PIPELINE_FAULT": fault})
    assert crashed.returncode == 137, crashed.stderr
    view = review.show(ledger, outcome.run_id)
    assert view.status == "approved" and not view.completed
    assert [r.run_id for r in review.pending(ledger)] == [outcome.run_id]  # still listed: not finished
    done = cli(harness, "review", "approve", outcome.run_id, "--by", "bob")
    assert done.returncode == 0, done.stderr
    assert "already approved" not in done.stdout  # it finished the work now
    assert review.show(ledger, outcome.run_id).decided_by == "alice"
    assert counts(ledger) == {"publications": 1, "verified": 1, "registrations": 1, "reports": 1}
    assert len(harness.pages) == 1  # one post on the site: no duplicate after the crash


def test_dry_run_writes_the_would_be_post_and_publishes_nothing(harness):
    from pipeline.ledger.writer import Ledger
    from pipeline.run.runner import run_once

    cfg = harness.config("honest", '[publish]\npreview_dir = "preview"\n')
    ledger = Ledger(cfg.ledger_url)
    outcome = run_once(cfg, ledger=ledger, dry_run=True, llm=harness.model("honest", cfg))
    assert (outcome.status, outcome.exit_code) == ("dry_run", 0)
    previews = list((harness.dir / "preview" / outcome.run_id / "posts").glob("*.html"))
    assert len(previews) == 1 and "nightly" in previews[0].read_text(encoding="utf-8")
    assert counts(ledger)["publications"] == 0 and not harness.pages and review.pending(ledger) == []


@pytest.mark.slow  # CLI subprocesses
def test_review_cli_lists_shows_and_rejects(harness):
    outcome, _cfg, _ledger = held(harness)
    listed = cli(harness, "review", "list")
    assert listed.returncode == 0 and outcome.run_id in listed.stdout and "preview:" in listed.stdout
    shown = cli(harness, "review", "show", outcome.run_id)
    assert shown.returncode == 0 and "pending" in shown.stdout and "the fix is usually a line or two" in shown.stdout
    assert cli(harness, "review", "show", "nope").returncode == 2
    rejected = cli(harness, "review", "reject", outcome.run_id, "--reason", "not ready", "--by", "carol")
    assert rejected.returncode == 0 and "rejected by carol" in rejected.stdout


def test_an_article_below_the_threshold_is_held_and_only_an_editor_publishes_it(harness):
    outcome, ledger = harness.run("honest", PIPELINE_HUMANIZE__THRESHOLD="99")
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert counts(ledger)["publications"] == 0 and not harness.pages
    cfg = harness.config("honest", PIPELINE_HUMANIZE__THRESHOLD="99")
    view, now = review.approve(cfg.run_settings(), ledger, outcome.run_id, "alice")
    assert now and view.completed and counts(ledger) == {"publications": 1, "verified": 1, "registrations": 1, "reports": 1}
    with ledger.read() as s:
        assert (s.get(Run, outcome.run_id).status) == "done"
