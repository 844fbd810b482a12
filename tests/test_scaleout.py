"""Beyond one machine: a PostgreSQL ledger shared by hosts, ticks run exactly once, Celery workers, HA daemons.

Real servers only: PostgreSQL, Redis, RabbitMQ (skipped with one line when absent,
failures under PIPELINE_REQUIRE_SERVICES=1), Celery worker subprocesses, and the
scripted model over HTTP.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlmodel import select

from pipeline import config as config_mod
from pipeline.errors import ChannelLocked, TickAlreadyRun
from pipeline.ledger.locks import channel_lock
from pipeline.ledger.models import Article, Publication, Registration, Run, Tick
from pipeline.ledger.writer import Ledger
from pipeline.run.events import RunObserver
from pipeline.run.runner import run_once

from services import broker_url
from support import KEY_ENV, write_config

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _verified_publications(ledger: Ledger, n: int) -> tuple[str, list[int]]:
    run = ledger.start_run("openai/x")
    with ledger.write() as s:
        ids = []
        for i in range(n):
            art = Article(run_id=run.id, kind="humanized", title=f"t{i}", body="b", language="en", content_hash=f"h{i}")
            s.add(art)
            s.flush()
            pub = Publication(run_id=run.id, article_id=art.id, idempotency_key=f"k{i}-{secrets.token_hex(4)}",
                              target="local", content_hash=f"h{i}", url=f"http://127.0.0.1/{i}", status="verified")
            s.add(pub)
            s.flush()
            ids.append(pub.id)
    return run.id, ids


def test_registration_numbers_under_concurrency_are_unique_and_gapless(ledger_url):
    """Sixteen writers register at the same instant, each through its own engine (its own connections)."""
    from pipeline.capabilities.register import register

    setup = Ledger(ledger_url)
    run_id, pub_ids = _verified_publications(setup, 16)
    cfg = SimpleNamespace(registration=SimpleNamespace(timezone="UTC", prefix="CT"))
    barrier = threading.Barrier(len(pub_ids))
    numbers, errors = [], []

    def one(pub_id: int) -> None:
        ledger = Ledger(ledger_url)
        ctx = SimpleNamespace(run_id=run_id, settings=cfg, ledger=ledger)
        barrier.wait()
        try:
            numbers.append(register.fn(ctx, pub_id)["registration_no"])
        except Exception as exc:  # reported below
            errors.append(exc)
        ledger.engine.dispose()

    threads = [threading.Thread(target=one, args=(p,)) for p in pub_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = sorted(int(n.rsplit("-", 1)[1]) for n in numbers)
    assert seqs == list(range(1, 17)), numbers


def _cfg(harness, ledger_url: str, scenario: str = "honest", extra: str = ""):
    return harness.config(scenario, extra, PIPELINE_LEDGER__URL=ledger_url)


def test_a_tick_runs_once_however_often_it_is_delivered(harness, ledger_url):
    cfg = _cfg(harness, ledger_url)
    ledger = Ledger(cfg.ledger_url)
    first = run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert first.exit_code == 0
    with pytest.raises(TickAlreadyRun):
        run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert run_once(cfg, ledger=ledger, tick=T0 + timedelta(days=1), llm=harness.model("honest", cfg)).exit_code == 0  # the next firing is new
    with ledger.read() as s:
        ticks = s.exec(select(Tick).order_by(Tick.scheduled_for)).all()
        assert [(t.state, t.attempts) for t in ticks] == [("done", 1), ("done", 1)]
        assert ticks[0].run_id == first.run_id
        assert len(s.exec(select(Run)).all()) == 2


def test_a_tick_whose_run_died_is_run_again_once(harness, ledger_url):
    cfg = _cfg(harness, ledger_url)
    ledger = Ledger(cfg.ledger_url)
    dead = ledger.start_run("openai/honest", channel="default", tick=T0)  # claimed, then the worker died
    outcome = run_once(cfg, ledger=ledger, tick=T0, llm=harness.model("honest", cfg))
    assert outcome.exit_code == 0
    assert ledger.get_run(dead.id).status == "crashed"
    with ledger.read() as s:
        tick = s.exec(select(Tick)).one()
        assert (tick.state, tick.attempts, tick.run_id) == ("done", 2, outcome.run_id)
        assert len(s.exec(select(Publication).where(Publication.status == "verified")).all()) == 1


def test_the_channel_lock_on_postgresql_excludes_other_sessions(harness, pg_url):
    cfg = _cfg(harness, pg_url)
    with channel_lock(cfg.ledger_url, cfg.state_dir, "default"):
        with pytest.raises(ChannelLocked, match="held by pipeline channel default pid"):
            run_once(cfg, llm=harness.model("honest", cfg))
        env = {**os.environ, KEY_ENV: "sk-test-not-a-real-key", "PIPELINE_LEDGER__URL": pg_url}
        proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(harness.dir / "config.toml")],
                              capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 75 and re.match(r"^\d{4}-\d\d-\d\dT\S+ skipped: locked", proc.stderr), proc.stderr
    assert run_once(cfg, llm=harness.model("honest", cfg)).exit_code == 0  # released with its session


# --- Celery ----------------------------------------------------------------------------------

CHANNELS = ("alpha", "beta", "gamma")


def _celery_config(directory: Path, api_base: str, ledger_url: str, broker: str, scenario: str = "honest") -> Path:
    channels = "".join(f'\n[[channels]]\nname = "{c}"\ncron = "0 9 * * *"\n' for c in CHANNELS)
    engine = f"""
[engine]
kind = "celery"
broker_url = "{broker}"
queue = "pipeline-test-{secrets.token_hex(3)}"
visibility_timeout_s = 30
"""
    return write_config(directory, api_base, scenario, engine + channels, ledger_url=ledger_url)


class Worker:
    """`pipeline worker` as a subprocess."""

    def __init__(self, config: Path, concurrency: int = 1) -> None:
        env = {**os.environ, KEY_ENV: "sk-test-not-a-real-key"}
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline", "worker", "--config", str(config),
                                      "--concurrency", str(concurrency)], cwd=config.parent, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def children(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> str:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.stdout.read() if self.proc.stdout else ""


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _ticks_done(ledger: Ledger, n: int):
    with ledger.read() as s:
        return len(s.exec(select(Tick).where(Tick.state == "done")).all()) >= n


@pytest.mark.slow
@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_celery_workers_run_each_tick_exactly_once(tmp_path, fake_llm, pg_url, broker):
    from pipeline.ops.celery_engine import make_app, send_tick
    from pipeline.ops.topology import engine_status

    path = _celery_config(tmp_path, fake_llm.api_base, pg_url, broker_url(broker))
    cfg = config_mod.load(path, environ={KEY_ENV: "x"})
    ledger = Ledger(cfg.ledger_url)
    app = make_app(cfg)
    for channel in CHANNELS:  # every tick twice: a duplicated message
        send_tick(app, cfg, channel, T0)
        send_tick(app, cfg, channel, T0)
    worker = Worker(path, concurrency=2)
    try:
        _wait(lambda: _ticks_done(ledger, 3), 90, "three ticks done")
        time.sleep(1.5)  # give the duplicates time to be (not) run
        status = engine_status(cfg.engine, cfg.ledger_url)
        assert len(status.workers) == 1 and status.queue_depth == 0, status
    finally:
        log = worker.stop()
    with ledger.read() as s:
        runs = s.exec(select(Run)).all()
        assert sorted(r.channel for r in runs) == sorted(CHANNELS), log
        assert all(r.status == "done" for r in runs), [(r.status, r.error) for r in runs]
        assert len(s.exec(select(Publication).where(Publication.status == "verified")).all()) == 3
        numbers = [r.registration_no for r in s.exec(select(Registration)).all()]
        assert len(numbers) == len(set(numbers)) == 3
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 3


@pytest.mark.slow
def test_a_worker_killed_mid_run_has_its_tick_redelivered_and_completed_once(tmp_path, pg_url):
    from pipeline.ops.celery_engine import make_app, send_tick

    from fakellm import FakeLLM

    slow = FakeLLM(delay_s=0.4).start()
    path = _celery_config(tmp_path, slow.api_base, pg_url, broker_url("redis"))
    cfg = config_mod.load(path, environ={KEY_ENV: "x"})
    ledger = Ledger(cfg.ledger_url)
    send_tick(make_app(cfg), cfg, "alpha", T0)
    worker = Worker(path, concurrency=1)
    try:
        def running():
            with ledger.read() as s:
                return s.exec(select(Run).where(Run.status == "running")).first()
        _wait(running, 60, "a run to start")
        time.sleep(1.0)
        (child,) = worker.children()
        os.kill(child, signal.SIGKILL)  # the process running the task dies mid-run
        _wait(lambda: _ticks_done(ledger, 1), 90, "the redelivered tick to complete")
    finally:
        log = worker.stop()
        slow.stop()
    with ledger.read() as s:
        runs = s.exec(select(Run).order_by(Run.started_at)).all()
        assert [r.status for r in runs] == ["crashed", "done"], log
        tick = s.exec(select(Tick)).one()
        assert (tick.state, tick.attempts, tick.run_id) == ("done", 2, runs[1].id)
        assert len(s.exec(select(Publication).where(Publication.status == "verified")).all()) == 1
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 1


# --- highly available scheduling --------------------------------------------------------------

def _daemon(config: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, KEY_ENV: "sk-test-not-a-real-key"}
    return subprocess.Popen([sys.executable, "-m", "pipeline", "daemon", "--config", str(config)], cwd=config.parent,
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_standby_daemon_takes_over_when_the_leader_is_killed(tmp_path, fake_llm, pg_url):
    path = write_config(tmp_path, fake_llm.api_base, "honest", '\n[daemon]\ncron = "*/4 * * * * *"\nstandby_poll_s = 0.5\n',
                        ledger_url=pg_url)
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    a = _daemon(path, a_log)
    _wait(lambda: "leading" in a_log.read_text(), 30, "daemon A to lead")
    b = _daemon(path, b_log)
    try:
        _wait(lambda: "standing by" in b_log.read_text(), 30, "daemon B to stand by")
        ledger = Ledger(pg_url)
        _wait(lambda: _ticks_done(ledger, 1), 90, "a first tick under A")
        a.kill()  # kill -9: no chance to release anything
        killed = time.monotonic()
        a.wait()
        _wait(lambda: "leading" in b_log.read_text(), 10, "daemon B to take the lead")
        takeover_s = time.monotonic() - killed
        with ledger.read() as s:
            before = len(s.exec(select(Tick)).all())
        _wait(lambda: _ticks_done(ledger, before + 1), 90, "a tick under B")
    finally:
        for d in (a, b):
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)
                d.wait(timeout=30)
    assert takeover_s < 3, takeover_s
    with ledger.read() as s:
        runs = s.exec(select(Run)).all()
        ticks = s.exec(select(Tick)).all()
    assert len({(t.channel, t.scheduled_for) for t in ticks}) == len(ticks)
    assert not [r for r in runs if r.status == "running"]
    done = [t for t in ticks if t.state == "done"]
    assert len({t.run_id for t in done}) == len(done)  # one run per completed tick


def _recent_tick() -> datetime:
    """A firing a few minutes ago: the daemon re-queues only recent ticks (``daemon.RESEND_HORIZON``)."""
    return (datetime.now(timezone.utc) - timedelta(minutes=5)).replace(second=0, microsecond=0)


def _age(ledger: Ledger, tick: datetime, **columns: float) -> None:
    """Move a tick's times ``columns`` (queued_at=…, lease_until=…) that many seconds into the past."""
    with ledger.write() as s:
        row = s.exec(select(Tick).where(Tick.scheduled_for == tick)).one()
        for name, seconds in columns.items():
            setattr(row, name, getattr(row, name) - timedelta(seconds=seconds))
        s.add(row)


def test_a_queued_tick_the_broker_lost_is_queued_again(tmp_path, fake_llm, pg_url):
    """Redis without persistence forgets its queues on a restart: the daemon resends unclaimed ticks, from the ledger."""
    from pipeline.ops import daemon
    from pipeline.ops.celery_engine import make_app, queue_depth

    path = _celery_config(tmp_path, fake_llm.api_base, pg_url, broker_url("redis"))
    cfg = config_mod.load(path, environ={KEY_ENV: "x"})
    app = make_app(cfg)
    tick = _recent_tick()
    ledger = Ledger(cfg.ledger_url)
    daemon.dispatch_channel(str(path), "alpha", tick.isoformat())
    assert ledger.tick_state("alpha", tick) == "queued"  # every tick the daemon queued has a row
    assert queue_depth(app, cfg.engine.queue) == 1
    with app.connection_for_write() as conn:  # the broker restarts and loses it
        conn.default_channel.queue_purge(cfg.engine.queue)
    assert queue_depth(app, cfg.engine.queue) == 0
    assert daemon.resend_unclaimed(str(path)) == 0  # not yet: it may still be on its way
    _age(ledger, tick, queued_at=cfg.engine.resend_after_s)
    assert daemon.resend_unclaimed(str(path)) == 1
    assert daemon.resend_unclaimed(str(path)) == 0  # queued_at moved on: once per resend_after_s
    assert queue_depth(app, cfg.engine.queue) == 1
    # Once a worker claims it, only a lapsed lease sends it again.
    run = ledger.start_run("openai/honest", channel="alpha", tick=tick, lease_s=cfg.engine.lease_s)
    _age(ledger, tick, queued_at=cfg.engine.resend_after_s)
    assert daemon.resend_unclaimed(str(path)) == 0
    _age(ledger, tick, lease_until=cfg.engine.lease_s + 1)
    assert daemon.resend_unclaimed(str(path)) == 1
    assert daemon.resend_unclaimed(str(path)) == 0  # the lease moved on: one daemon, one send per lease
    ledger.finish_run(run.id, "done", 0)
    _age(ledger, tick, queued_at=cfg.engine.resend_after_s)
    assert daemon.resend_unclaimed(str(path)) == 0
    kinds = [e.kind for e in ledger.tick_events(ledger.tick_row("alpha", tick).id)]
    assert kinds == ["queued", "requeued", "claimed", "requeued", "finished"], kinds
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(cfg.engine.queue)


def test_a_run_whose_lock_session_dies_stops_at_its_next_step(harness, pg_url, monkeypatch):
    """Without its lock another host could start the channel: the run stops instead of running alongside."""
    import psycopg

    from pipeline.ledger import locks

    monkeypatch.setattr(locks, "WATCH_INTERVAL_S", 0.1)
    cfg = _cfg(harness, pg_url)
    dbname = pg_url.rsplit("/", 1)[1]
    killed = threading.Event()

    class KillAfterFirstStep(RunObserver):
        def tool_finished(self, name, ok, payload) -> None:
            if killed.is_set():
                return
            # after the first step, kill the lock's session
            with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                              "AND application_name LIKE 'pipeline channel%%'", (dbname,))
            killed.set()
            time.sleep(0.5)

    outcome = run_once(cfg, observer=KillAfterFirstStep(), llm=harness.model("honest", cfg))
    assert killed.is_set()
    assert outcome.status == "interrupted" and "the session holding channel default ended" in outcome.error
