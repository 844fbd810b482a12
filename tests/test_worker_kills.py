"""Exactly once per tick when a worker dies after its post went live (issue 24), on real servers.

PostgreSQL ledger, Redis and RabbitMQ brokers, real `pipeline worker` processes and a leading
`pipeline daemon`, the scripted model over HTTP. The worker dies right after the publication row
committed ``verified``: its prefork child alone, or the whole worker (parent and child, then restarted).
Each must end with one verified publication and one registration for the tick, the tick done, within
the lease bound plus one run — with Redis's visibility timeout left at an hour, so a whole worker's
tick can only come back through the lease.
"""

from __future__ import annotations

import time

import pytest

from pipeline import config as config_mod
from pipeline.ledger.writer import Ledger

from fakellm import FakeLLM
from services import broker_url
from worker_kills import KEY_ENV, celery_config, count, daemon, done, recent_tick, wait, worker

LEASE_S = 6
# One run on the scripted model (0.2 s a turn) plus a worker's start, on a loaded 2-core machine.
RUN_S = 60


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["child", "worker"])
@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_worker_killed_right_after_its_post_is_verified_leaves_one_post_and_one_registration(tmp_path, pg_url, broker, kind):
    from pipeline.ops.celery_engine import make_app, send_tick, workers_seen

    fake = FakeLLM(delay_s=0.2).start()
    path = celery_config(tmp_path, fake.api_base, pg_url, broker_url(broker), ["alpha"], lease_s=LEASE_S)
    cfg = config_mod.load(path, environ={KEY_ENV: "x"})
    ledger, app = Ledger(cfg.ledger_url), make_app(cfg)
    once = tmp_path / "killed"
    lead = daemon(path, tmp_path / "daemon.log")
    procs = [lead, worker(path, tmp_path / "worker.log", "after_verified", kind, once)]
    try:
        wait(lambda: "leading" in lead.log.read_text(), 60, "the daemon to lead")
        wait(lambda: workers_seen(app, 1.0), 90, "the worker to answer")
        tick = recent_tick()
        ledger.queue_tick("alpha", tick)
        send_tick(app, cfg, "alpha", tick)
        wait(once.exists, 90, "the worker to die after its post was verified")
        killed = time.time()
        assert ledger.tick_state("alpha", tick) == "claimed"
        if kind == "worker":
            wait(lambda: not procs[1].alive(), 10, "the whole worker to be gone")
            procs.append(worker(path, tmp_path / "worker.log", "after_verified", kind, once))  # the supervisor restarts it
        wait(lambda: done(ledger, "alpha", tick), LEASE_S * 4 / 3 + RUN_S, "the tick to be done")
        settled_s = time.time() - killed
        time.sleep(3)  # room for a second run, if anything were to start one
        result = count(ledger, "alpha", tick)
    finally:
        for p in reversed(procs):
            p.stop()
        fake.stop()
    logs = "\n".join(p.log.read_text()[-3000:] for p in procs[:2])
    assert (result.state, result.posts, result.registrations) == ("done", 1, 1), (result, logs)
    assert result.run_statuses == ["crashed"], (result, logs)  # settled, not run again
    assert "settled" in result.events, result.events
    print(f"{broker}/{kind}: done {settled_s:.1f} s after the kill; events {result.events}")
