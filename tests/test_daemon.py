"""Scheduled operation: channels, the per-channel lock, missed ticks, graceful stop, alerts, status."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline import config as config_mod
from pipeline.ledger.locks import channel_lock
from pipeline.ledger.writer import Ledger
from pipeline.ops import daemon
from pipeline.runtime import shutdown
from pipeline.views.status import channel_status

from fakellm import FakeLLM
from support import KEY_ENV, Recorder, write_config


@pytest.fixture
def recorder():
    rec = Recorder()
    yield rec
    rec.server.shutdown()


@pytest.fixture
def slow_llm():
    fake = FakeLLM(delay_s=0.15).start()
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def _reset_stop_flag():
    shutdown.reset()
    yield
    shutdown.reset()


CHANNELS = """
[daemon]
state_dir = "state"
misfire_grace_time_s = {grace}
executor = "{executor}"

[[channels]]
name = "alpha"
cron = "{cron}"

[[channels]]
name = "beta"
cron = "{cron}"
agent = {{ language = "zh" }}
"""


def channel_config(tmp_path, api_base, scenario="honest", cron="0 * * * *", grace=6 * 3600, extra="", executor="thread"):
    # Threads keep scheduling tests fast; the process pool (the default) is tested where concurrency matters.
    path = write_config(tmp_path, api_base, scenario, CHANNELS.format(cron=cron, grace=grace, executor=executor) + extra)
    return path


def runs(tmp_path):
    con = sqlite3.connect(tmp_path / "ledger.db")
    try:
        return con.execute("SELECT id, channel, status, started_at, finished_at FROM runs ORDER BY started_at").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def wait_for(predicate, timeout=30.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def test_channels_merge_their_tables_over_the_top_level(tmp_path, fake_llm, monkeypatch):
    cfg = config_mod.load(channel_config(tmp_path, fake_llm.api_base), environ={})
    assert cfg.channel_names() == ["alpha", "beta"]
    assert cfg.for_channel("beta").agent.language == "zh" and cfg.for_channel("alpha").agent.language == "en"
    assert cfg.for_channel("beta").channel.cron == "0 * * * *"
    with pytest.raises(Exception, match="several channels"):
        cfg.for_channel(None)
    with pytest.raises(Exception, match="no channel 'gamma'"):
        cfg.for_channel("gamma")


def test_overlapping_run_exits_75_at_once_and_writes_nothing(tmp_path, fake_llm):
    path = write_config(tmp_path, fake_llm.api_base, "honest")
    cfg = config_mod.load(path, environ={})
    with channel_lock(cfg.ledger_url, cfg.state_dir, "default"):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(path)], capture_output=True,
                              text=True, timeout=30, env={**os.environ, KEY_ENV: "x"})
        elapsed = time.monotonic() - started
    assert proc.returncode == 75
    # Off a terminal the line starts with its time (issue 25): cron logs say when.
    assert proc.stdout == "" and re.match(r"^\d{4}-\d\d-\d\dT\S+ skipped: locked", proc.stderr.strip())
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "site").exists()
    print(f"overlapping run exited 75 after {elapsed:.2f} s (process start included)")
    assert elapsed < 5  # a hang guard, not a benchmark: bench/ measures the latency


def test_two_channels_due_together_run_concurrently(tmp_path, slow_llm, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    path = channel_config(tmp_path, slow_llm.api_base, executor="process")
    cfg = config_mod.load(path)
    scheduler = daemon.build_scheduler(cfg, str(path))
    daemon.warm(scheduler)
    try:
        now = datetime.now(timezone.utc)
        for job in scheduler.get_jobs():
            job.modify(next_run_time=now)
        scheduler.resume()
        assert wait_for(lambda: len([r for r in runs(tmp_path) if r[2] != "running"]) == 2)
    finally:
        scheduler.shutdown(wait=True)
    (_a, ach, ast, a0, a1), (_b, bch, bst, b0, b1) = runs(tmp_path)
    assert {ach, bch} == {"alpha", "beta"} and ast == bst == "done"
    assert b0 < a1 and a0 < b1  # the two runs overlapped in time


def test_restart_after_three_missed_ticks_runs_each_channel_once(tmp_path, fake_llm, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    path = channel_config(tmp_path, fake_llm.api_base)  # hourly
    cfg = config_mod.load(path)
    # First daemon life: jobs are stored. Then it is down for 3 hours and 10 minutes: the stored
    # next run time is left 3 ticks in the past (edited in the job store, as the downtime would).
    daemon.build_scheduler(cfg, str(path)).shutdown(wait=True)
    missed = datetime.now(timezone.utc) - timedelta(hours=3, minutes=10)
    _rewind_job_store(cfg.state_dir / daemon.JOBSTORE_FILE, missed)

    scheduler = daemon.build_scheduler(cfg, str(path))  # the restart
    try:
        assert all(j.next_run_time.astimezone(timezone.utc) <= missed + timedelta(seconds=1) for j in scheduler.get_jobs())
        scheduler.resume()
        assert wait_for(lambda: len([r for r in runs(tmp_path) if r[2] == "done"]) >= 2)
        time.sleep(1.0)  # room for any (wrong) extra catch-up run
        next_runs = [j.next_run_time for j in scheduler.get_jobs()]
    finally:
        scheduler.shutdown(wait=True)
    assert sorted(r[1] for r in runs(tmp_path)) == ["alpha", "beta"]
    assert all(t > datetime.now(timezone.utc) for t in next_runs)


def _rewind_job_store(path: Path, when: datetime) -> None:
    import pickle

    con = sqlite3.connect(path)
    with con:
        for job_id, state in con.execute("SELECT id, job_state FROM apscheduler_jobs").fetchall():
            job = pickle.loads(state)
            job["next_run_time"] = when
            con.execute("UPDATE apscheduler_jobs SET next_run_time = ?, job_state = ? WHERE id = ?",
                        (when.timestamp(), pickle.dumps(job, pickle.HIGHEST_PROTOCOL), job_id))
    con.close()


def test_tick_missed_beyond_grace_is_alerted_not_run(tmp_path, fake_llm, recorder, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "x")
    extra = f'\n[alerts]\nwebhook_url = "{recorder.base}/hook"\nformat = "feishu"\n'
    missed = datetime.now(timezone.utc) - timedelta(minutes=30)
    # Hourly at the missed tick's minute: no later tick falls due before now. (With "0 * * * *", a test
    # run in the first minute of an hour found the on-the-hour tick within the grace, and rightly ran it.)
    path = channel_config(tmp_path, fake_llm.api_base, cron=f"{missed.minute} * * * *", grace=60, extra=extra)
    cfg = config_mod.load(path)
    scheduler = daemon.build_scheduler(cfg, str(path))
    try:
        for job in scheduler.get_jobs():
            job.modify(next_run_time=missed)
        scheduler.resume()
        assert wait_for(lambda: len(recorder.hits) >= 2)
    finally:
        scheduler.shutdown(wait=True)
    assert runs(tmp_path) == []
    texts = [body["content"]["text"] for _, body in recorder.hits]
    assert all("missed" in t for t in texts) and {"alpha", "beta"} <= {t.split()[2] for t in texts}


def _daemon(path: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", "daemon", "--config", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _daemon_mid_run(tmp_path: Path, api_base: str, executor: str) -> subprocess.Popen:
    """A daemon firing every second, returned once a run is in progress."""
    path = write_config(tmp_path, api_base, "honest",
                        f'\n[daemon]\ncron = "* * * * * *"\nstate_dir = "state"\nexecutor = "{executor}"\n')
    proc = _daemon(path, {KEY_ENV: "x"})
    if not wait_for(lambda: any(r[2] == "running" for r in runs(tmp_path)), timeout=60):
        proc.kill()
        pytest.fail("the daemon never started a run")
    return proc


def _integrity(tmp_path) -> str:
    con = sqlite3.connect(tmp_path / "ledger.db")
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_sigterm_mid_run_finishes_the_step_and_exits_0(tmp_path, slow_llm, executor):
    proc = _daemon_mid_run(tmp_path, slow_llm.api_base, executor)
    try:
        time.sleep(0.4)  # somewhere in the middle of the pipeline
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    statuses = {r[2] for r in runs(tmp_path)}
    assert statuses <= {"interrupted", "done"} and "running" not in statuses
    assert _integrity(tmp_path) == "ok"
    con = sqlite3.connect(tmp_path / "ledger.db")
    assert con.execute("SELECT COUNT(*) FROM executions WHERE ok IS NULL").fetchone()[0] == 0  # no half-written fact


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_second_signal_exits_at_once_with_a_consistent_ledger(tmp_path, slow_llm, executor):
    proc = _daemon_mid_run(tmp_path, slow_llm.api_base, executor)
    try:
        # Back to back, and two different signals so the kernel cannot merge them into one: the second
        # lands while the first is still stopping. (With a pause between them a graceful stop, which
        # abandons the call in flight, can finish first and rightly exit 0.)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert _integrity(tmp_path) == "ok"
    assert "running" not in {r[2] for r in runs(tmp_path)}


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.slow
def test_worker_processes_die_with_a_killed_daemon(tmp_path, slow_llm):
    proc = _daemon_mid_run(tmp_path, slow_llm.api_base, "process")
    workers = _children(proc.pid)
    try:
        assert workers, "the process pool has no workers"
        proc.kill()
        proc.wait(timeout=10)
        # Orphaned workers would keep the model loaded and the daemon's pipes open (cron mail never ends).
        assert wait_for(lambda: not any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers),
                        timeout=10)
    finally:
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.communicate(timeout=10)  # EOF on both pipes: no process holds them any more


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def test_a_second_daemon_on_the_same_job_store_is_refused(tmp_path, fake_llm):
    path = write_config(tmp_path, fake_llm.api_base, "honest", '\n[daemon]\nstate_dir = "state"\n')
    from pipeline.ledger.locks import hold

    with hold(tmp_path / "state" / "daemon.lock", "test"):
        proc = subprocess.run([sys.executable, "-m", "pipeline", "daemon", "--config", str(path)],
                              capture_output=True, text=True, timeout=30)
    assert proc.returncode == 75 and "skipped: locked" in proc.stderr


def test_hallucinating_run_triggers_the_webhook_and_the_exit_code_ping(harness, recorder):
    extra = f'\n[alerts]\nwebhook_url = "{recorder.base}/hook"\nformat = "slack"\nping_url = "{recorder.base}/ping"\n'
    outcome, _ = harness.run("prose", extra)
    assert outcome.exit_code == 3
    paths = [p.split("?")[0] for p, _ in recorder.hits]
    assert paths == ["/ping/start", "/ping/3", "/hook"]
    text = recorder.hits[2][1]["text"]
    assert "channel default" in text and outcome.run_id in text
    assert f"pipeline ledger diff --run {outcome.run_id}" in text


def test_successful_run_pings_0_and_sends_no_alert(harness, recorder):
    extra = f'\n[alerts]\nwebhook_url = "{recorder.base}/hook"\nping_url = "{recorder.base}/ping"\n'
    outcome, _ = harness.run("honest", extra)
    assert outcome.exit_code == 0
    assert [p.split("?")[0] for p, _ in recorder.hits] == ["/ping/start", "/ping/0"]


def test_health_pings_carry_the_run_id_and_a_body(harness, recorder):
    from urllib.parse import parse_qs, urlsplit

    from pipeline.runtime.alerts import ping_rid

    outcome, _ = harness.run("prose", f'\n[alerts]\nping_url = "{recorder.base}/ping"\n')
    (start, start_body), (end, end_body) = recorder.hits
    rid = str(ping_rid(outcome.run_id))
    assert parse_qs(urlsplit(start).query) == {"rid": [rid]} == parse_qs(urlsplit(end).query)  # pairs start and end
    assert outcome.run_id in start_body and "openai/prose" in start_body
    assert f"run {outcome.run_id} channel default: hallucination (exit 3)" in end_body
    assert f"pipeline ledger diff --run {outcome.run_id}" in end_body


@pytest.mark.parametrize("fmt,shape", [
    ("slack", {"text"}), ("feishu", {"msg_type", "content"}), ("lark", {"msg_type", "content"}),
    ("dingtalk", {"msgtype", "text"}), ("wecom", {"msgtype", "text"}),
])
def test_chat_formats(fmt, shape):
    from pipeline.runtime.alerts import chat_payload

    assert set(chat_payload(fmt, "hello")) == shape


def test_status_reports_each_channel_and_fails_on_a_failed_run(harness, monkeypatch):
    _outcome, _ = harness.run("honest")
    cfg = harness.config("honest")
    [row] = channel_status(cfg)
    assert row.channel == "default" and row.last_status == "done" and row.publications_today == 1
    assert row.next_run and not row.failed
    harness.run("silent")
    [row] = channel_status(harness.config("silent"))
    assert row.failed and row.last_status == "incomplete"


def test_status_overdue_when_a_tick_passed_without_a_run(tmp_path, fake_llm):
    # A cron deployment declared a day ago: the last */5 tick, more than a minute old, had no run.
    since = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    path = write_config(tmp_path, fake_llm.api_base, "honest", '\n[daemon]\ncron = "*/5 * * * *"\noverdue_after_s = 60\n'
                        f'scheduler = "cron"\ncron_since = "{since}"\n')
    [row] = channel_status(config_mod.load(path, environ={}))
    assert row.overdue and row.last_run is None
    proc = subprocess.run([sys.executable, "-m", "pipeline", "status", "--json", "--config", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and json.loads(proc.stdout)[0]["overdue"] is True


def test_a_run_killed_mid_way_is_reported_crashed_by_the_next_run(harness, recorder):
    from sqlmodel import select

    from pipeline.ledger.models import Run

    extra = f'\n[alerts]\nwebhook_url = "{recorder.base}/hook"\n'
    cfg = harness.config("honest", extra)
    ledger = Ledger(cfg.ledger_url)
    dead = ledger.start_run(cfg.llm.model)  # as a kill -9 leaves it: "running", no outcome
    outcome, _ = harness.run("honest", extra)
    assert outcome.exit_code == 0
    with ledger.read() as s:
        assert s.exec(select(Run.status).where(Run.id == dead.id)).one() == "crashed"
    [(_path, body)] = recorder.hits
    assert dead.id in body["text"] and "crashed" in body["text"]
