"""Issue 14: stuck dependencies and bad local state.

A provider that trickles bytes or never answers, a platform that never answers, SIGTERM during
either, a full disk, and local state that is wrong before anything starts. Servers are on
127.0.0.1 (tests/stuck.py). No timing figures here: bench/bench_deadlines.py measures them; the
waits below only bound how long a broken build may hang the suite.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pipeline import config as config_mod
from pipeline.errors import ProviderUnavailableError
from pipeline.ledger.writer import Ledger
from pipeline.model.llm import ChatModel
from pipeline.run.events import RunObserver
from pipeline.run.runner import run_once
from pipeline.runtime import shutdown

from scenarios import scripted
from stuck import StuckServer, wait_for_request
from support import KEY_ENV, OFFLINE_API_BASE, REPO, write_config


def write(directory: Path, api_base: str, model: str = "openai/x", extra: str = "", llm_extra: str = "") -> Path:
    return write_config(directory, api_base, model.removeprefix("openai/"), extra, llm_extra=llm_extra)


def runs(directory: Path) -> list[tuple[str, str, int | None, str | None]]:
    con = sqlite3.connect(directory / "ledger.db")
    try:
        return con.execute("SELECT id, status, exit_code, error FROM runs ORDER BY started_at").fetchall()
    finally:
        con.close()


@pytest.fixture
def server():
    started = []

    def start(mode: str, interval_s: float = 0.5) -> StuckServer:
        s = StuckServer(mode, interval_s).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def _in_thread(fn):
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(90)  # only a bound on a broken build: a hanging call would run for minutes
    assert not t.is_alive(), "the call is still running: no total deadline"
    return box


@pytest.mark.litellm  # a hanging provider, through litellm
@pytest.mark.parametrize("mode", ["trickle", "silent"])
def test_a_trickling_or_silent_provider_is_cut_off_by_the_call_deadline(tmp_path, server, monkeypatch, mode):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    srv = server(mode)
    cfg = config_mod.load(write(tmp_path, f"{srv.base_url}/v1", llm_extra="call_deadline_s = 2"))
    box = _in_thread(lambda: ChatModel(cfg.llm).complete([{"role": "user", "content": "hi"}]))
    assert isinstance(box.get("error"), ProviderUnavailableError), box
    assert "call_deadline_s = 2" in str(box["error"])


@pytest.mark.litellm  # a hanging provider, through litellm
def test_the_step_deadline_ends_the_run_with_exit_124(tmp_path, server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    srv = server("trickle")
    cfg = config_mod.load(write(tmp_path, f"{srv.base_url}/v1", llm_extra="call_deadline_s = 0",
                                extra="[agent]\nstep_deadline_s = 1.5\nrun_deadline_s = 60\n"))
    box = _in_thread(lambda: run_once(cfg))
    outcome = box["value"]
    assert (outcome.status, outcome.exit_code) == ("timed_out", 124), outcome
    assert "step: model turn" in outcome.error
    assert runs(tmp_path)[0][1:3] == ("timed_out", 124)


@pytest.mark.litellm  # a hanging provider, through litellm
def test_the_run_deadline_ends_the_run_and_frees_the_channel(tmp_path, server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    srv = server("silent")
    cfg = config_mod.load(write(tmp_path, f"{srv.base_url}/v1", llm_extra="call_deadline_s = 0",
                                extra="[agent]\nstep_deadline_s = 0\nrun_deadline_s = 1.5\n"))
    outcome = _in_thread(lambda: run_once(cfg))["value"]
    assert (outcome.status, outcome.exit_code) == ("timed_out", 124) and "run:" in outcome.error
    from pipeline.ledger.locks import channel_lock

    with channel_lock(cfg.ledger_url, cfg.state_dir, "default"):  # released: the next cron run is not locked out
        pass


def _spawn_run(directory: Path, cfg: Path) -> subprocess.Popen:
    env = {**os.environ, KEY_ENV: "sk-test"}
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--config", str(cfg)], cwd=directory, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["silent", "trickle"])
def test_sigterm_interrupts_a_hanging_model_call(tmp_path, server, mode):
    srv = server(mode)
    proc = _spawn_run(tmp_path, write(tmp_path, f"{srv.base_url}/v1"))
    try:
        assert wait_for_request(srv), "the run never called the model"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)  # before: 45 s and exit 5 (silent), still running at 90 s (trickle)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    [(_, status, code, _)] = runs(tmp_path)
    assert (status, code) == ("interrupted", 130)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_interrupts_a_hanging_platform_call_and_leaves_the_outcome_unknown(tmp_path, server, fake_llm):
    srv = server("silent")
    cfg = write(tmp_path, fake_llm.api_base, model="openai/honest", extra=f"""
[publish]
target = "webhook"
allowed_domains = ["127.0.0.1"]
timeout_s = 60

[publish.webhook]
url = "{srv.base_url}/hook"
""")
    proc = _spawn_run(tmp_path, cfg)
    try:
        assert wait_for_request(srv, timeout_s=120), "the run never reached publish"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert runs(tmp_path)[0][1] == "interrupted"
    con = sqlite3.connect(tmp_path / "ledger.db")
    [(status, why)] = con.execute("SELECT status, verification FROM publications").fetchall()
    assert status == "pending" and "outcome unknown" in why  # recovery asks the platform; never "not published"


@pytest.mark.slow
def test_a_second_signal_still_leaves_a_truthful_run_row(tmp_path, server):
    srv = server("silent")
    proc = _spawn_run(tmp_path, write(tmp_path, f"{srv.base_url}/v1"))
    try:
        assert wait_for_request(srv)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert [r[1] for r in runs(tmp_path)] == ["interrupted"]


def test_force_finish_marks_this_process_runs_interrupted(tmp_path):
    from pipeline.run.runner import _track, force_finish

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    run = ledger.start_run("m")
    other = ledger.start_run("m")  # not this process's: untouched
    _track(run.id, ledger)
    force_finish()
    assert {r[0]: r[1] for r in runs(tmp_path)} == {run.id: "interrupted", other.id: "running"}


def test_a_stop_request_abandons_backoff_pauses(tmp_path, monkeypatch):
    from pipeline.errors import RunInterrupted
    from pipeline.runtime import deadline

    stopped = threading.Event()
    stopped.set()  # as the first SIGTERM leaves it
    monkeypatch.setattr(shutdown, "_stop", stopped)
    with pytest.raises(RunInterrupted):
        deadline.sleep(3600)


# --- bad local state: exit 2, one line, before anything is written ---------------------------------------

VALIDATE = textwrap.dedent("""
    import contextlib, io, json, sys, time
    from pathlib import Path
    from pipeline.cli import app
    results = {}
    for name, path in json.loads(sys.argv[1]).items():
        err = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = app(["run", "--config", path], standalone_mode=False)  # click returns Exit's code
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # click raises typer.Exit as click.exceptions.Exit
                code = getattr(exc, "exit_code", repr(exc))
        results[name] = {"code": code, "stderr": err.getvalue(), "litellm": "litellm" in sys.modules,
                         "ledger": (Path(path).parent / "ledger.db").exists(),
                         "seconds": time.perf_counter() - start}
    print(json.dumps(results))
""")


@pytest.mark.slow  # CLI subprocesses
def test_bad_local_state_is_exit_2_and_one_line_before_anything_happens(tmp_path):
    cases: dict[str, Path] = {}

    def case(name: str, text: str | bytes, setup=None) -> None:
        d = tmp_path / name
        d.mkdir()
        p = d / "config.toml"
        base = '[llm]\nmodel = "openai/x"\napi_key_env = ""\napi_base = "http://127.0.0.1:9/v1"\n[ledger]\nurl = "sqlite:///ledger.db"\n'
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(base + text, encoding="utf-8")
        if setup:
            setup(d)
        cases[name] = p

    case("not_utf8", b'[llm]\nmodel = "openai/x"\nniche = "caf\xe9"\n')
    case("empty_model", b'[llm]\nmodel = ""\napi_key_env = ""\n[ledger]\nurl = "sqlite:///ledger.db"\n')
    case("register_timezone", '[register]\ntimezone = "Mars/Olympus_Mons"\n')
    case("daemon_timezone", '[daemon]\ntimezone = "Nowhere/Else"\n')
    case("bad_cron", '[daemon]\ncron = "61 25 * * *"\n')
    case("ledger_not_sqlite", "", lambda d: (d / "ledger.db").write_text("this is not a database\n"))
    case("backlog_not_utf8", '[topic]\nbacklog = "b.txt"\n', lambda d: (d / "b.txt").write_bytes(b"caf\xe9 | x\n"))
    results = json.loads(subprocess.run([sys.executable, "-c", VALIDATE, json.dumps({k: str(v) for k, v in cases.items()})],
                                        cwd=REPO, capture_output=True, text=True, timeout=120, check=True).stdout)
    where = {"not_utf8": "not UTF-8", "empty_model": "model", "register_timezone": "[register] timezone",
             "daemon_timezone": "[daemon] timezone", "bad_cron": "cron", "ledger_not_sqlite": "not an SQLite database",
             "backlog_not_utf8": "[topic] backlog"}
    for name, r in results.items():
        lines = r["stderr"].strip().splitlines()
        assert r["code"] == 2, (name, r)
        assert len(lines) == 1 and lines[0].startswith("error:") and where[name] in lines[0], (name, r)
        assert not r["litellm"], name  # found before the seconds-long import
        if name != "ledger_not_sqlite":
            assert not r["ledger"], name  # nothing written


@pytest.mark.slow  # CLI subprocesses
def test_checking_the_ledger_keeps_this_process_sqlite_locks(tmp_path):
    """fcntl locks belong to the process: closing any other descriptor on the ledger drops SQLite's.

    A daemon worker keeps its ledger open across runs and checks the file before each one; if the
    check opened and closed the file itself, another process could take the lock this connection
    still relies on (in WAL mode: delete the live WAL; the poller in test_daemon saw no rows at all).
    """
    from pipeline.run import validate
    db = tmp_path / "ledger.db"
    sqlite3.connect(db).executescript("CREATE TABLE t (x); INSERT INTO t VALUES (1);").close()
    (tmp_path / "topics.txt").write_text("A topic\n", encoding="utf-8")  # validate refuses a missing backlog
    (tmp_path / "config.toml").write_text(f'[llm]\nmodel = "openai/x"\napi_key_env = ""\nmodel_check = false\n[ledger]\nurl = "sqlite:///{db}"\n',
                                          encoding="utf-8")
    cfg = config_mod.load(tmp_path / "config.toml", environ={})
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM t").fetchall()  # holds a SHARED lock until COMMIT
    try:
        validate.upfront(cfg)
        other = subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0); "
                                "c.execute('BEGIN EXCLUSIVE'); print('took it')", str(db)],
                               capture_output=True, text=True, timeout=60)
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert "took it" not in other.stdout and "locked" in other.stderr, (other.stdout, other.stderr)


@pytest.mark.slow  # CLI subprocesses
def test_a_read_only_ledger_directory_is_exit_2(tmp_path):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (as root, permissions alone never refuse a write)")
    try:
        cfg = tmp_path / "config.toml"
        cfg.write_text(f'[llm]\nmodel = "openai/x"\napi_key_env = ""\nmodel_check = false\n[ledger]\nurl = "sqlite:///{mnt}/ledger.db"\n',
                       encoding="utf-8")
        r = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(cfg)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["umount", str(mnt)])
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "[ledger] url" in r.stderr and "Traceback" not in r.stderr


# --- a full disk ---------------------------------------------------------------------------------------------


def test_a_full_disk_mid_run_is_exit_7_with_a_truthful_run_row(tmp_path, monkeypatch):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        monkeypatch.setenv(KEY_ENV, "sk-test")
        cfg = config_mod.load(write(mnt, OFFLINE_API_BASE, model="openai/honest"))

        class FillAfterDraft(RunObserver):
            def tool_finished(self, name, ok, payload) -> None:
                if name != "draft":
                    return
                with open(mnt / "filler", "wb") as fh:  # the disk fills up while the run works
                    try:
                        while True:
                            fh.write(b"\0" * 65536)
                            fh.flush()
                            os.fsync(fh.fileno())
                    except OSError:
                        pass

        outcome = run_once(cfg, observer=FillAfterDraft(), llm=scripted("honest", cfg.llm))
        assert (outcome.status, outcome.exit_code) == ("environment", 7), outcome
        assert "disk full" in outcome.error
        (mnt / "filler").unlink()
        [(_, status, code, error)] = runs(mnt)
        assert (status, code) == ("environment", 7) and "disk full" in error  # before: left "running", exit 1
        again = run_once(cfg, llm=scripted("honest", cfg.llm))  # space is back: the next run works
        assert again.exit_code == 0, again.error
    finally:
        subprocess.run(["umount", "-l", str(mnt)])
