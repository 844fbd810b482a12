"""A tick ends on business state (pipeline/ticks.py): an attempt that published is settled, never run again.

In-process on SQLite and PostgreSQL: a run "killed" after its post went live (SystemExit from an observer
leaves the run ``running`` and the tick ``claimed``, as a kill -9 would, and releases the channel lock as the
kernel does). The same on real Celery workers killed by signal is in tests/test_worker_kills.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlmodel import select

from pipeline.errors import TickAlreadyRun
from pipeline.ledger.models import Publication, Registration, Report, Run, Tick
from pipeline.ledger.writer import Ledger
from pipeline.run.events import RunObserver
from pipeline.run.runner import run_once
from pipeline.runtime.alerts import Alerter

LEDGER_BACKENDS = ("sqlite", "postgresql")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


class Killed(BaseException):
    """Stands for the process dying: nothing in the runner catches it."""


class DieAfter(RunObserver):
    def __init__(self, step: str) -> None:
        self.step = step

    def tool_finished(self, name, ok, payload) -> None:
        if name == self.step and ok:
            raise Killed(f"killed after {name}")


@pytest.fixture
def alerts(monkeypatch):
    sent: list[tuple[str, str | None, str]] = []
    monkeypatch.setattr(Alerter, "alert", lambda self, channel, run_id, outcome, detail: sent.append((channel, run_id, outcome)))
    return sent


def _killed_run(harness, cfg, ledger, step: str) -> str:
    with pytest.raises(Killed):
        run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg), observer=DieAfter(step))
    with ledger.read() as s:
        dead = s.exec(select(Run)).one()
    assert dead.status == "running" and ledger.tick_state("default", T0) == "claimed"
    return dead.id


def test_a_redelivery_after_the_post_went_live_settles_the_tick_and_does_not_run_again(harness, alerts):
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    dead = _killed_run(harness, cfg, ledger, "publish")
    with pytest.raises(TickAlreadyRun, match="settled"):
        run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    with ledger.read() as s:
        runs = s.exec(select(Run)).all()
        pubs = s.exec(select(Publication).where(Publication.status == "verified")).all()
        regs = s.exec(select(Registration)).all()
        reports = s.exec(select(Report)).all()
        tick = s.exec(select(Tick)).one()
    assert [(r.id, r.status) for r in runs] == [(dead, "crashed")]  # no second run
    assert len(pubs) == 1 and [r.publication_id for r in regs] == [pubs[0].id]
    assert [r.run_id for r in reports] == [dead]  # the report the dead run did not write
    assert (tick.state, tick.run_id, tick.attempts) == ("done", dead, 1)
    assert f"publication {pubs[0].id}" in tick.outcome and regs[0].registration_no in tick.outcome
    assert [e.kind for e in ledger.tick_events(tick.id)] == ["claimed", "settled"]
    assert ("default", dead, "tick settled") in alerts
    # A later delivery of the same tick is a no-op, recorded as such.
    with pytest.raises(TickAlreadyRun, match="already ran"):
        run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert [e.kind for e in ledger.tick_events(tick.id)] == ["claimed", "settled", "noop"]
    with ledger.read() as s:
        assert len(s.exec(select(Publication)).all()) == 1 and len(s.exec(select(Run)).all()) == 1


@pytest.mark.parametrize("step", ["register", "report"])
def test_a_run_killed_after_register_or_report_is_settled_with_one_registration_and_one_report(harness, alerts, step):
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    dead = _killed_run(harness, cfg, ledger, step)
    with pytest.raises(TickAlreadyRun, match="settled"):
        run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    with ledger.read() as s:
        assert len(s.exec(select(Publication).where(Publication.status == "verified")).all()) == 1
        assert len(s.exec(select(Registration)).all()) == 1
        assert [r.run_id for r in s.exec(select(Report)).all()] == [dead]
        assert s.exec(select(Tick)).one().state == "done"


def test_a_run_killed_before_publishing_is_re_claimed_run_once_and_alerted(harness, alerts):
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    dead = _killed_run(harness, cfg, ledger, "humanize")
    outcome = run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert outcome.exit_code == 0
    with ledger.read() as s:
        tick = s.exec(select(Tick)).one()
        assert len(s.exec(select(Publication).where(Publication.status == "verified")).all()) == 1
    assert (tick.state, tick.attempts, tick.run_id) == ("done", 2, outcome.run_id)
    assert [e.kind for e in ledger.tick_events(tick.id)] == ["claimed", "reclaimed", "finished"]
    assert ledger.runs_of_tick(tick.id) == [dead, outcome.run_id]
    assert ("default", outcome.run_id, "tick re-claimed") in alerts


def test_the_claim_carries_a_lease_on_the_ledgers_clock_that_its_run_renews(harness):
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    run = ledger.start_run("openai/honest", tick=T0, lease_s=30)
    tick = ledger.tick_row("default", T0)
    first = tick.lease_until
    assert timedelta(seconds=29) < first - tick.claimed_at <= timedelta(seconds=30)
    assert ledger.renew_lease(tick.id, run.id, 60)
    assert ledger.tick_row("default", T0).lease_until > first
    assert not ledger.renew_lease(tick.id, "r-someone-else", 60)  # only the claimant renews
    ledger.finish_run(run.id, "done", 0)
    assert not ledger.renew_lease(tick.id, run.id, 60)  # a finished tick has no lease
    assert ledger.tick_row("default", T0).lease_until is None


def test_a_delivery_that_finds_no_row_leaves_one(harness):
    """A busy delivery of a tick nobody queued (a duplicate, a second scheduler) still leaves a trace."""
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    ledger.tick_event("default", T0, "busy", "skipped: locked")
    tick = ledger.tick_row("default", T0)
    assert (tick.state, tick.attempts) == ("queued", 0)
    assert [e.kind for e in ledger.tick_events(tick.id)] == ["busy"]
    outcome = run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert outcome.exit_code == 0
    tick = ledger.tick_row("default", T0)
    assert (tick.state, tick.attempts) == ("done", 1)  # the first claim, not a re-claim


def test_ledger_check_reports_ticks_with_no_outcome(harness):
    from pipeline.ledger.check import check

    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    ledger.start_run("openai/honest", tick=T0, lease_s=30)  # claimed, then its worker died
    ledger.queue_tick("default", T0 + timedelta(days=1))  # queued, never delivered
    ledger.mark_crashed("default")
    assert check(ledger.engine).ok  # within the hour: the daemon's re-queue still owns them
    with ledger.write() as s:
        for row in s.exec(select(Tick)).all():
            row.claimed_at -= timedelta(hours=2)
            row.queued_at = row.queued_at and row.queued_at - timedelta(hours=2)
            row.lease_until = row.lease_until and row.lease_until - timedelta(hours=2)
            s.add(row)
    health = check(ledger.engine)
    lines = [p for p in health.problems if p.startswith("tick ")]
    assert not health.ok and len(lines) == 2, health.problems
    assert "claimed by run" in lines[1] and "(crashed)" in lines[1]
    assert "queued, never claimed" in lines[0]


def test_status_does_not_call_a_queued_first_tick_overdue(harness, monkeypatch):
    """A channel whose first tick waits in the queue is not overdue; one past overdue_after_s with no run is."""
    from pipeline.views.status import channel_status

    now = datetime.now(timezone.utc)
    # A cron deployment declared a day ago: ticks since then count (issue 25's rule), queued or not.
    cfg = harness.config("honest", '\n[[channels]]\nname = "minutely"\ncron = "* * * * *"\n',
                         PIPELINE_DAEMON__SCHEDULER="cron",
                         PIPELINE_DAEMON__CRON_SINCE=f"\"{(now - timedelta(days=1)).isoformat()}\"")
    ledger = Ledger(cfg.ledger_url)
    ledger.queue_tick("minutely", now.replace(second=0, microsecond=0))
    (row,) = [r for r in channel_status(cfg, now=now, ledger=ledger) if r.channel == "minutely"]
    assert not row.overdue
    later = now + timedelta(seconds=cfg.daemon.overdue_after_s + 120)
    (row,) = [r for r in channel_status(cfg, now=later, ledger=ledger) if r.channel == "minutely"]
    assert row.overdue


def test_the_scheduler_lead_reads_as_a_daemon_on_a_host_and_says_the_daemon_runs():
    from pipeline.ledger.locks import lead_label
    from pipeline.ops.topology import _leader_text
    from pipeline.views.status import EngineStatus

    since = datetime(2026, 12, 1, 21, 5, 3, tzinfo=timezone.utc)
    text, pid = _leader_text("pipeline daemon pid 812 on host-a", "10.0.0.5", since)
    assert (text, pid) == ("daemon pid 812 on host-a (10.0.0.5), leading since 2026-12-01 21:05:03 UTC", 812)
    text, pid = _leader_text("pipeline the scheduler's lead pid 77", None, since)  # a daemon of an older release
    assert (text, pid) == ("daemon pid 77 (local socket), leading since 2026-12-01 21:05:03 UTC", 77)
    assert lead_label().startswith("pipeline daemon pid ") and len(lead_label()) <= 63
    state = EngineStatus("celery", postgres=True, scheduler_leader=text, leader_pid=pid).daemon()
    assert (state.running, state.pid) == (True, 77)
    assert not EngineStatus("celery", postgres=True).daemon().running
