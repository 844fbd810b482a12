"""What operators rely on (issue 25), through real processes: a daemon, Debian's cron, a backup under load, the CLI.

The cron test needs Debian's ``cron`` and root (it writes /etc/cron.d); without them it skips with one
line, unless ``PIPELINE_REQUIRE_REAL_PLATFORMS=1`` (CI), which makes it a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fakellm import FakeLLM
from services import missing
from support import KEY_ENV, OFFLINE_API_BASE, REPO, TEST_KEY, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # real processes on a shared 2-core host

PIPELINE = [sys.executable, "-m", "pipeline"]


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "PIPELINE_CONFIG"}
    return subprocess.run([*PIPELINE, *args], cwd=cwd, env={**full, KEY_ENV: TEST_KEY, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def wait_for(predicate, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def rows(db: Path, sql: str) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return con.execute(sql).fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


def status(path: Path) -> tuple[int, list[dict]]:
    proc = cli("status", "--json", "--config", str(path), cwd=path.parent)
    assert proc.returncode in (0, 1, 3), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


# --- 1 and 2: a real daemon ----------------------------------------------------------------------

@pytest.fixture
def daemon_config(tmp_path):
    # A yearly tick long past: before the daemon existed, so never overdue; nothing runs during the test.
    return write_config(tmp_path, OFFLINE_API_BASE, "honest",
                        '\n[daemon]\nstate_dir = "state"\ncron = "0 0 1 1 *"\nscheduler = "daemon"\n'
                        "heartbeat_s = 1\noverdue_after_s = 60\n")


def start_daemon(path: Path, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_CONFIG"}
    return subprocess.Popen([*PIPELINE, "daemon", "--config", str(path), *extra], cwd=path.parent,
                            env={**env, KEY_ENV: TEST_KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_real_daemon_health_is_ok_while_it_lives_and_down_once_it_stops(daemon_config):
    """Finding 1: right after start, a channel whose tick predates the daemon is healthy (was: overdue,
    exit 1); after a clean stop the deployment is unhealthy with its own exit code (was: exit 0)."""
    db = daemon_config.parent / "ledger.db"
    proc = start_daemon(daemon_config)
    try:
        assert wait_for(lambda: rows(db, "SELECT id FROM daemons WHERE stopped_at IS NULL"), 60), "no heartbeat row"
        code, data = status(daemon_config)
        assert code == 0, data
        assert data[0]["health"] == "ok" and data[0]["scheduler"]["alive"] is True
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    code, data = status(daemon_config)
    assert code == 3
    assert data[0]["health"] == "scheduler_down" and "stopped at" in data[0]["reason"]
    text = cli("status", "--config", str(daemon_config), cwd=daemon_config.parent)
    assert text.returncode == 3 and "stopped at" in text.stdout


def test_real_daemon_kill_9_is_down_once_its_heartbeats_stop(daemon_config):
    db = daemon_config.parent / "ledger.db"
    proc = start_daemon(daemon_config)
    try:
        assert wait_for(lambda: rows(db, "SELECT id FROM daemons"), 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert wait_for(lambda: status(daemon_config)[0] == 3, 30)  # three missed beats of 1 s
    assert "died without stopping" in status(daemon_config)[1][0]["reason"]


def test_a_stopped_daemon_leaves_the_whole_ledger_in_the_database_file(daemon_config):
    """Finding 2: after SIGTERM, ledger.db alone (immutable, as datasette -i reads it) holds the ledger."""
    db = daemon_config.parent / "ledger.db"
    proc = start_daemon(daemon_config)
    try:
        assert wait_for(lambda: rows(db, "SELECT id FROM daemons"), 60)
        time.sleep(1.5)  # a heartbeat or two
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    wal = db.with_name("ledger.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "daemons", "ticks"} <= tables
    assert con.execute("SELECT count(*) FROM daemons WHERE stopped_at IS NOT NULL").fetchone()[0] == 1


def test_real_daemon_logs_its_start_and_each_outcome_at_info_with_times(tmp_path):
    """Finding 7: without -v the daemon says it started and how each run ended, each line timestamped off a tty."""
    fake = FakeLLM().start()
    try:
        path = write_config(tmp_path, fake.api_base, "honest",
                            '\n[daemon]\nstate_dir = "state"\ncron = "*/2 * * * * *"\nscheduler = "daemon"\n')
        proc = start_daemon(path)
        try:
            assert wait_for(lambda: rows(tmp_path / "ledger.db", "SELECT id FROM runs WHERE status = 'done'"), 90)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    finally:
        fake.stop()
    lines = err.splitlines()
    stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} "
    started = [line for line in lines if "daemon started" in line]
    assert started and re.match(stamp + "INFO ", started[0]), err
    assert any(re.match(stamp + r"INFO channel default: run r\S+ done \(exit 0\)", line) for line in lines), err
    assert any(re.match(stamp + "INFO channel default: next run ", line) for line in lines), err


# --- 1: a real cron ------------------------------------------------------------------------------

def _cron_daemon() -> subprocess.Popen | None:
    """Debian's cron: the one already running, or one started here (returned, to be stopped by the test)."""
    if subprocess.run(["pgrep", "-x", "cron"], capture_output=True).returncode == 0:
        return None
    return subprocess.Popen([shutil.which("cron") or "cron", "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_real_cron_deployment_is_healthy_from_its_declared_start_and_runs(tmp_path):
    """Finding 1 under Debian's cron: just installed, a every-minute channel is not overdue (was: exit 1,
    the tick 15 minutes back counted as missed); cron then fires `pipeline run` and status stays ok."""
    if shutil.which("cron") is None:
        missing("cron (Debian package)", "not installed; make test installs it as root", env="PIPELINE_REQUIRE_REAL_PLATFORMS")
    if os.geteuid() != 0 or not os.access("/etc/cron.d", os.W_OK):
        missing("cron (Debian package)", "not root: cannot write /etc/cron.d", env="PIPELINE_REQUIRE_REAL_PLATFORMS")
    fake = FakeLLM().start()
    now = datetime.now(timezone.utc).replace(microsecond=0)
    path = write_config(tmp_path, fake.api_base, "honest",
                        f'\n[daemon]\nstate_dir = "state"\ncron = "* * * * *"\nscheduler = "cron"\n'
                        f'cron_since = "{now.isoformat()}"\n')
    tab = Path("/etc/cron.d") / f"pipeline-test-{secrets.token_hex(4)}"  # no dot: cron ignores names with one
    log = tmp_path / "cron.log"
    # cron's environment is its own: the test scorer (conftest) is named here, as the key is.
    command = (f"cd {tmp_path} && {KEY_ENV}={TEST_KEY} PIPELINE_SCORER={os.environ['PIPELINE_SCORER']} "
               f"{sys.executable} -m pipeline run --config {path} "
               f">> {log} 2>&1")
    tab.write_text(f"SHELL=/bin/sh\n* * * * * root {command}\n", encoding="utf-8")
    tab.chmod(0o644)
    cron = _cron_daemon()
    try:
        code, data = status(path)
        assert code == 0 and data[0]["health"] == "ok", data
        assert data[0]["scheduler"]["kind"] == "cron"
        db = tmp_path / "ledger.db"
        assert wait_for(lambda: rows(db, "SELECT id FROM runs WHERE status = 'done'"), 130, step=1), \
            f"cron did not run pipeline: {log.read_text() if log.exists() else 'no log'}"
        code, data = status(path)
        assert code == 0 and data[0]["last_status"] == "done", data
        # Off a terminal the run's block starts with its time (cron mail and log files say when).
        first = log.read_text(encoding="utf-8").splitlines()[0]
        assert first[:4].isdigit() and "T" in first[:11] and " run r" in first, first
    finally:
        tab.unlink(missing_ok=True)
        if cron is not None:
            cron.terminate()
            cron.wait(timeout=10)
        fake.stop()


# --- 2: backup under load ------------------------------------------------------------------------

WRITER = """
import sys
from pipeline.ledger.writer import Ledger
ledger = Ledger(sys.argv[1])
while True:
    run = ledger.start_run("m")
    ledger.finish_run(run.id, "done", 0)
    print(run.id, flush=True)  # after COMMIT: this run is durable
"""


def test_a_backup_taken_under_concurrent_writes_holds_every_committed_row(tmp_path):
    """Finding 2: `ledger backup` while another process commits runs: the copy opens immutable, alone, and
    holds every run committed before the backup began; `ledger check --ledger` verifies it."""
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True)
    committed: list[str] = []
    try:
        while len(committed) < 30:
            committed.append(writer.stdout.readline().strip())
        backup = cli("ledger", "backup", str(tmp_path / "copy.db"), "--config", str(path), cwd=tmp_path)
        more = writer.stdout.readline().strip()  # the writer was still going after the backup
    finally:
        writer.kill()
        writer.wait()
    assert backup.returncode == 0, backup.stderr
    assert more and "backed up" in backup.stdout
    copy = tmp_path / "copy.db"
    assert not copy.with_name("copy.db-wal").exists()
    con = sqlite3.connect(f"file:{copy}?immutable=1", uri=True)
    ids = {r[0] for r in con.execute("SELECT id FROM runs WHERE status = 'done'")}
    assert set(committed) <= ids
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check = cli("ledger", "check", "--ledger", str(copy), cwd=tmp_path)
    assert check.returncode == 0 and "integrity_check: ok" in check.stdout, check.stdout + check.stderr
    again = cli("ledger", "backup", str(copy), "--config", str(path), cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr and len(again.stderr.splitlines()) == 1


def test_backup_of_a_postgresql_ledger_says_pg_dump(tmp_path):
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest", ledger_url="postgresql+psycopg://u@127.0.0.1:1/x")
    proc = cli("ledger", "backup", str(tmp_path / "x"), "--config", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "pg_dump" in proc.stderr and len(proc.stderr.splitlines()) == 1


# --- 3, 4, 5, 6: refusals up front ---------------------------------------------------------------

@pytest.mark.parametrize("command", [["run"], ["daemon"], ["worker"], ["serve"], ["ledger", "migrate"]])
def test_acting_commands_refuse_without_a_config_and_create_nothing(tmp_path, command):
    """Finding 4: no built-in defaults: exit 2, one line saying where it looked, the directory left empty."""
    proc = cli(*command, cwd=tmp_path, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"looked for config.toml in {tmp_path}" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_missing_backlog_is_refused_before_anything_is_recorded(tmp_path):
    """Finding 3: `[topic] backlog = "nope.txt"`: exit 2, one line, no ledger (was: exit 0, a made-up topic)."""
    fake = FakeLLM().start()
    try:
        path = write_config(tmp_path, fake.api_base, "honest", backlog=tmp_path / "nope.txt")
        proc = cli("run", "--config", str(path), cwd=tmp_path)
    finally:
        fake.stop()
    assert proc.returncode == 2 and "nope.txt" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "ledger.db").exists()


def test_an_unknown_model_is_refused_at_once_with_no_run_row(tmp_path):
    """Finding 5: `model = "gtp-4o-mini"`: exit 2, one line with a suggestion, no ledger, no litellm paragraph."""
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest")
    text = path.read_text().replace('model = "openai/honest"', 'model = "gtp-4o-mini"').replace(
        f'api_base = "{OFFLINE_API_BASE}"', "")
    path.write_text(text)
    started = time.monotonic()
    proc = cli("run", "--config", str(path), cwd=tmp_path)
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "did you mean 'gpt-4o-mini'" in proc.stderr, proc.stderr
    assert proc.stdout == "" and not (tmp_path / "ledger.db").exists()
    assert took < 30  # not a timing assertion on speed: a guard against the litellm import path coming back


def test_an_env_override_that_does_not_parse_is_reported_as_the_variable(tmp_path):
    """Finding 6: PIPELINE_AGENT__MAX_TURNS=abc names the variable, not the file."""
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest")
    proc = cli("run", "--config", str(path), cwd=tmp_path, env={"PIPELINE_AGENT__MAX_TURNS": "abc"})
    assert proc.returncode == 2 and proc.stderr.startswith("error: environment PIPELINE_AGENT__MAX_TURNS=abc:")


# --- 7: CLI conventions --------------------------------------------------------------------------

def test_help_command_and_global_config(tmp_path):
    """Finding 7: `pipeline help [CMD]`, and `pipeline --config X CMD`."""
    top = cli("help", cwd=tmp_path)
    assert top.returncode == 0 and "status" in top.stdout and "init" in top.stdout
    sub = cli("help", "ledger", "backup", cwd=tmp_path)
    assert sub.returncode == 0 and "DEST" in sub.stdout and "--config" in sub.stdout
    assert cli("help", "nope", cwd=tmp_path).returncode == 2
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest")
    glob = cli("--config", str(path), "status", "--json", cwd=REPO)
    assert glob.returncode == 0 and json.loads(glob.stdout)[0]["channel"] == "default", glob.stderr


def test_init_writes_the_starter_config_and_never_overwrites(tmp_path):
    proc = cli("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "config.toml").read_text() == (REPO / "config.toml").read_text()
    assert (tmp_path / "topics.txt").read_text() == (REPO / "topics.txt").read_text()
    assert (tmp_path / "notes" / "en" / "nightly-builds.md").read_text() == (REPO / "notes/en/nightly-builds.md").read_text()
    again = cli("init", cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr


def test_a_skipped_run_never_lands_inside_a_running_runs_output(tmp_path):
    """Finding 7: two cron runs append to one log; the second is skipped (channel locked). Its line is
    before or after the first run's block, never inside it."""
    fake = FakeLLM(delay_s=0.3).start()
    log = tmp_path / "cron.log"
    try:
        path = write_config(tmp_path, fake.api_base, "honest")
        env = {**{k: v for k, v in os.environ.items() if k != "PIPELINE_CONFIG"}, KEY_ENV: TEST_KEY}
        with open(log, "ab") as f:
            first = subprocess.Popen([*PIPELINE, "run", "--config", str(path)], stdout=f, stderr=subprocess.STDOUT, env=env)
            try:
                assert wait_for(lambda: rows(tmp_path / "ledger.db", "SELECT id FROM executions"), 60)
                second = subprocess.run([*PIPELINE, "run", "--config", str(path)], stdout=f, stderr=subprocess.STDOUT,
                                        env=env, timeout=60)
                assert first.wait(timeout=120) == 0
            finally:
                first.kill()
    finally:
        fake.stop()
    assert second.returncode == 75
    lines = log.read_text(encoding="utf-8").splitlines()
    skip = next(i for i, line in enumerate(lines) if "skipped" in line)
    start = next(i for i, line in enumerate(lines) if " run r" in f" {line}" and "model" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("hallucinations caught"))
    assert not start < skip < end, lines
