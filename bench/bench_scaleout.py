"""Scale-out on real servers: load over 1/2/4 Celery workers, and fault injection.

    .venv/bin/python bench/bench_scaleout.py load   [--channels 200] [--delay 0.2] [--workers 1,2,4]
    .venv/bin/python bench/bench_scaleout.py faults [--repeat 10] [--only worker,leader,pg,broker]

Needs PostgreSQL, Redis and RabbitMQ on 127.0.0.1 (as on the development and CI machines).

load: N channels due at once, each tick queued on Redis, the scripted model answering
each call after --delay s; for each worker count, `pipeline worker --concurrency 1`
processes are started and pinged ready before the ticks are queued, then timed until
every tick is done. Checks: every channel ran exactly once, no duplicate publication,
no duplicate registration number. Reports throughput and the 4-vs-1 ratio.

faults (each --repeat times, counts reported):
  worker  kill -9 of the worker process running a tick, mid-run: the tick is redelivered
          and completes once; no duplicate post; no run left running.
  leader  kill -9 of the leading daemon (two daemons on one PostgreSQL): time until the
          standby leads; afterwards no tick ran twice and no run is left running.
  pg      pg_terminate_backend of the ledger's connections mid-run: the run fails or
          retries cleanly; the tick completes once; nothing half-written.
  broker  RabbitMQ restarted while ticks are queued: no tick lost.

Writes bench/results/scaleout.json (merged with earlier sections).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
KEY_ENV = "PIPELINE_TEST_LLM_KEY"
os.environ[KEY_ENV] = "sk-bench"

from sqlmodel import select  # noqa: E402

from pipeline import config as config_mod  # noqa: E402
from pipeline.ledger.models import Publication, Registration, Run, Tick  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402
from pipeline.ops.celery_engine import make_app, send_tick, workers_seen  # noqa: E402

from fakellm import FakeLLM  # noqa: E402
from services import RABBITMQ_URL, REDIS_URL, postgres_database  # noqa: E402

RESULTS = REPO / "bench" / "results" / "scaleout.json"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


WORDS = ("cache queue index schema retry budget trace metric shard replica lock lease token cursor batch stream "
         "backoff deadline quota tenant cohort feature rollout canary sidecar proxy gateway ledger audit cron webhook "
         "parser lexer compiler linker kernel thread fiber socket buffer arena heap stack vector matrix tensor graph "
         "planner optimizer vacuum checkpoint snapshot journal commit rebase branch tag release hotfix incident pager").split()


def write_backlog(directory: Path, n: int) -> Path:
    """n topics different enough that none counts as a repeat of another (the shipped backlog has 11)."""
    import random

    rng = random.Random(7)
    titles: set[str] = set()
    while len(titles) < n:
        a, b, c = rng.sample(WORDS, 3)
        titles.add(f"{a.capitalize()} meets {b}: notes on {c} number {len(titles)}")
    path = directory / "topics.txt"
    notes = REPO / "tests" / "fixtures" / "sources" / "notes.md"  # what the fake model's article is written from
    path.write_text("\n".join(f"{t} | | {notes}" for t in sorted(titles)) + "\n", encoding="utf-8")
    return path


def write_config(directory: Path, api_base: str, ledger_url: str, broker: str, channels: int, extra: str = "") -> Path:
    backlog = write_backlog(directory, channels + 50)
    chans = "".join(f'\n[[channels]]\nname = "c{i:03d}"\ncron = "0 9 * * *"\n' for i in range(channels))
    path = directory / "config.toml"
    path.write_text(f"""
[llm]
model = "openai/honest"
api_base = "{api_base}"
api_key_env = "{KEY_ENV}"
max_retries = 2
backoff_s = 0.05
timeout_s = 30
[ledger]
url = "{ledger_url}"
[topic]
backlog = "{backlog}"
[publish.local]
dir = "site"
base_url = "http://127.0.0.1:8765"
[engine]
kind = "celery"
broker_url = "{broker}"
queue = "bench-{os.getpid()}-{time.monotonic_ns()}"
visibility_timeout_s = 60
{extra}
{chans}""", encoding="utf-8")
    return path


def start_worker(config: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", "worker", "--config", str(config), "--concurrency", "1"],
                            cwd=config.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def wait(predicate, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    return None


def done_ticks(ledger: Ledger) -> int:
    with ledger.read() as s:
        return len(s.exec(select(Tick.id).where(Tick.state == "done")).all())


def invariants(ledger: Ledger, site: Path) -> dict:
    with ledger.read() as s:
        runs = s.exec(select(Run)).all()
        ticks = s.exec(select(Tick)).all()
        pubs = s.exec(select(Publication).where(Publication.status == "verified")).all()
        regs = [r.registration_no for r in s.exec(select(Registration)).all()]
    serving = {t.run_id for t in ticks}
    return {
        "ticks": len(ticks), "ticks_done": sum(t.state == "done" for t in ticks),
        # A completed run that no tick points at would be a second run of some tick.
        "done_runs_serving_no_tick": sum(r.status == "done" and r.id not in serving for r in runs),
        "runs_left_running": sum(r.status == "running" for r in runs),
        "verified_publications": len(pubs),
        "duplicate_publications": len(pubs) - len({p.run_id for p in pubs}),
        "posts_on_site": len(list((site / "posts").glob("*.html"))) if (site / "posts").exists() else 0,
        "duplicate_registration_numbers": len(regs) - len(set(regs)),
        "statuses": {st: sum(r.status == st for r in runs) for st in sorted({r.status for r in runs})},
        "errors": sorted({(r.error or "")[:160] for r in runs if r.status not in ("done", "crashed")})[:3],
    }


def load(args) -> dict:
    fake = FakeLLM(delay_s=args.delay).start()
    out = {"channels": args.channels, "delay_s": args.delay, "runs": {}}
    for n in args.workers:
        with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            path = write_config(work, fake.api_base, url, f"{REDIS_URL}/9", args.channels)
            cfg = config_mod.load(path)
            ledger = Ledger(cfg.ledger_url)
            app = make_app(cfg)
            workers = [start_worker(path) for _ in range(n)]
            try:
                if not wait(lambda: len(workers_seen(app, 1.0)) >= n, 120):
                    raise SystemExit(f"{n} workers did not come up")
                t0 = time.perf_counter()
                for i in range(args.channels):
                    send_tick(app, cfg, f"c{i:03d}", T0)
                finished = wait(lambda: done_ticks(ledger) >= args.channels, 3600)
                elapsed = time.perf_counter() - t0
            finally:
                stop(workers)
            result = {"seconds": round(elapsed, 1), "runs_per_s": round(args.channels / elapsed, 3),
                      "completed": bool(finished), **invariants(ledger, work / "site")}
            out["runs"][str(n)] = result
            print(f"workers={n}: {json.dumps(result)}", flush=True)
            ledger.engine.dispose()
    fake.stop()
    if "1" in out["runs"] and "4" in out["runs"]:
        out["throughput_ratio_4_vs_1"] = round(out["runs"]["4"]["runs_per_s"] / out["runs"]["1"]["runs_per_s"], 2)
    return out


def fault_worker(fake, repeat: int) -> dict:
    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = write_config(work, fake.api_base, url, f"{REDIS_URL}/10", repeat)
        cfg = config_mod.load(path)
        ledger, app = Ledger(cfg.ledger_url), make_app(cfg)
        worker = start_worker(path)
        kills = 0
        try:
            wait(lambda: workers_seen(app, 1.0), 120)
            for i in range(repeat):
                send_tick(app, cfg, f"c{i:03d}", T0)
                def running():
                    with ledger.read() as s:
                        return s.exec(select(Run).where(Run.status == "running", Run.channel == f"c{i:03d}")).first()
                if wait(running, 60):
                    time.sleep(0.5 + 0.15 * (i % 7))  # land at different points of the run
                    child = subprocess.run(["pgrep", "-P", str(worker.pid)], capture_output=True, text=True).stdout.split()
                    if child:
                        os.kill(int(child[0]), signal.SIGKILL)
                        kills += 1
                wait(lambda: done_ticks(ledger) >= i + 1, 120)
        finally:
            stop([worker])
        return {"kills": kills, **invariants(ledger, work / "site")}


def fault_pg(fake, repeat: int) -> dict:
    import psycopg

    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = write_config(work, fake.api_base, url, f"{REDIS_URL}/11", repeat)
        cfg = config_mod.load(path)
        ledger, app = Ledger(cfg.ledger_url), make_app(cfg)
        dbname = url.rsplit("/", 1)[1]
        worker = start_worker(path)
        terminated = 0
        try:
            wait(lambda: workers_seen(app, 1.0), 120)
            for i in range(repeat):
                send_tick(app, cfg, f"c{i:03d}", T0)
                def running():
                    with ledger.read() as s:
                        return s.exec(select(Run).where(Run.status == "running", Run.channel == f"c{i:03d}")).first()
                if wait(running, 60):
                    time.sleep(0.3 + 0.2 * (i % 5))
                    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as admin:
                        # The worker's ledger connections (not the lock sessions, named "pipeline …").
                        terminated += admin.execute(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s "
                            "AND application_name NOT LIKE 'pipeline %%' AND pid <> pg_backend_pid()",
                            (dbname,)).fetchone()[0]
                wait(lambda: done_ticks(ledger) >= i + 1, 180)
        finally:
            stop([worker])
        with ledger.engine.connect() as conn:
            orphans = conn.exec_driver_sql(
                "SELECT count(*) FROM executions e LEFT JOIN runs r ON r.id = e.run_id WHERE r.id IS NULL").scalar()
        return {"connections_terminated": terminated, "orphan_executions": orphans, **invariants(ledger, work / "site")}


def fault_broker(fake, repeat: int) -> dict:
    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        per = 3
        path = write_config(work, fake.api_base, url, RABBITMQ_URL, repeat * per)
        cfg = config_mod.load(path)
        ledger, app = Ledger(cfg.ledger_url), make_app(cfg)
        worker = start_worker(path)
        restarts = 0
        try:
            wait(lambda: workers_seen(app, 1.0), 120)
            for i in range(repeat):
                for j in range(per):
                    send_tick(app, cfg, f"c{i * per + j:03d}", T0)
                subprocess.run(["rabbitmqctl", "stop_app"], capture_output=True, timeout=120)
                subprocess.run(["rabbitmqctl", "start_app"], capture_output=True, timeout=120)
                restarts += 1
                wait(lambda: done_ticks(ledger) >= (i + 1) * per, 180)
        finally:
            stop([worker])
        return {"restarts": restarts, "ticks_queued": repeat * per, **invariants(ledger, work / "site")}


def fault_leader(fake, repeat: int) -> dict:
    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = work / "config.toml"
        path.write_text(f"""
[llm]
model = "openai/honest"
api_base = "{fake.api_base}"
api_key_env = "{KEY_ENV}"
[ledger]
url = "{url}"
[topic]
backlog = "{REPO / 'tests' / 'fixtures' / 'sources' / 'topics.txt'}"
[publish.local]
dir = "site"
base_url = "http://127.0.0.1:8765"
[daemon]
cron = "*/3 * * * * *"
standby_poll_s = 0.5
""")
        logs: list[Path] = []

        def start() -> subprocess.Popen:
            log = work / f"daemon{len(logs)}.log"
            logs.append(log)
            return subprocess.Popen([sys.executable, "-m", "pipeline", "daemon", "--config", str(path)], cwd=work,
                                    stdout=log.open("w"), stderr=subprocess.STDOUT)

        ledger = Ledger(url)
        daemons = [start()]
        wait(lambda: "leading" in logs[0].read_text(), 60)
        daemons.append(start())
        takeovers = []
        try:
            for _ in range(repeat):
                leader = next(i for i, d in enumerate(daemons) if d.poll() is None and "leading" in logs[i].read_text())
                standby = next(i for i, d in enumerate(daemons) if d.poll() is None and i != leader)
                wait(lambda: "standing by" in logs[standby].read_text(), 60)
                wait(lambda: done_ticks(ledger) >= 1, 90)
                daemons[leader].kill()
                t0 = time.monotonic()
                daemons[leader].wait()
                if wait(lambda: "leading" in logs[standby].read_text(), 30):
                    takeovers.append(round(time.monotonic() - t0, 2))
                before = done_ticks(ledger)
                wait(lambda: done_ticks(ledger) > before, 60)  # the new leader runs ticks
                daemons.append(start())
        finally:
            for d in daemons:
                if d.poll() is None:
                    d.send_signal(signal.SIGTERM)
            for d in daemons:
                try:
                    d.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    d.kill()
        # The last leader was stopped; a crashed run of a killed leader is marked by the next run of its channel.
        return {"leader_kills": repeat, "takeovers": len(takeovers),
                "takeover_s_median": sorted(takeovers)[len(takeovers) // 2] if takeovers else None,
                "takeover_s_max": max(takeovers) if takeovers else None, **invariants(ledger, work / "site")}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    p_load = sub.add_parser("load")
    p_load.add_argument("--channels", type=int, default=200)
    p_load.add_argument("--delay", type=float, default=0.2)
    p_load.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    p_faults = sub.add_parser("faults")
    p_faults.add_argument("--repeat", type=int, default=10)
    p_faults.add_argument("--only", default="worker,leader,pg,broker")
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.what == "load":
        results["load"] = load(args)
    else:
        fake = FakeLLM(delay_s=0.2).start()
        results.setdefault("faults", {})
        for name in args.only.split(","):
            fn = {"worker": fault_worker, "leader": fault_leader, "pg": fault_pg, "broker": fault_broker}[name]
            results["faults"][name] = fn(fake, args.repeat)
            print(f"{name}: {json.dumps(results['faults'][name])}", flush=True)
            RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        fake.stop()
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
