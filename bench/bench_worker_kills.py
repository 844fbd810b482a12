"""The fault bench for issue 24: a worker killed at every step boundary, on Redis and RabbitMQ.

    .venv/bin/python bench/bench_worker_kills.py [--repeat 10] [--lease 30] [--brokers redis,rabbitmq]
                                                 [--kinds child,worker] [--points before_topic,…]

Needs PostgreSQL, Redis and RabbitMQ on 127.0.0.1. Real processes: one leading `pipeline daemon` (its
re-queue finds lapsed leases) and one `pipeline worker --concurrency 1`, the scripted model over HTTP
answering each call after 0.2 s, Redis's visibility timeout at its default hour.

For each broker × kind × kill point, --repeat ticks, one channel each: the tick is queued, the worker dies
at the point (tests/faults.py STEPS: before_topic, after_draft, after_humanize, after_verified,
after_register, after_report), and the bench waits for the tick to be done. kind "child": the prefork
child running the tick dies (os._exit; its parent lives on). kind "worker": the whole worker, parent and
child, is SIGKILLed and a new one started at once, as a supervisor would. Per cell: ticks, verified posts
and registrations per tick (every run of the channel counted, not only the tick's), runs left running,
seconds from the kill to the tick done (median, max), and how ticks ended (settled / re-claimed and run).

Writes bench/results/worker_kills.json and prints the table as Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pipeline import config as config_mod  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402
from pipeline.ops.celery_engine import make_app, send_tick, workers_seen  # noqa: E402

from fakellm import FakeLLM  # noqa: E402
from faults import STEPS  # noqa: E402
from services import RABBITMQ_URL, REDIS_URL, postgres_database  # noqa: E402
from worker_kills import KEY_ENV, celery_config, count, daemon, done, recent_tick, wait, worker  # noqa: E402

RESULTS = REPO / "bench" / "results" / "worker_kills.json"
BROKERS = {"redis": f"{REDIS_URL}/12", "rabbitmq": RABBITMQ_URL}


def cell_rows(fake: FakeLLM, broker: str, kind: str, points: list[str], repeat: int, lease_s: int) -> list[dict]:
    """One PostgreSQL ledger and one daemon for a broker × kind; a worker per kill point."""
    rows = []
    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        channels = [f"{p[:12]}-{i}" for p in points for i in range(repeat)]
        path = celery_config(work, fake.api_base, url, BROKERS[broker], channels, lease_s=lease_s)
        os.environ[KEY_ENV] = "sk-bench"
        cfg = config_mod.load(path)
        ledger, app = Ledger(cfg.ledger_url), make_app(cfg)
        lead = daemon(path, work / "daemon.log")
        try:
            wait(lambda: "leading" in lead.log.read_text(), 90, "the daemon to lead")
            for point in points:
                once = work / f"killed-{point}"
                once.touch()  # disarmed until the tick is queued
                w = worker(path, work / f"worker-{point}.log", point, kind, once)
                procs = [w]
                try:
                    wait(lambda: workers_seen(app, 1.0), 120, "the worker to answer")
                    settle, ended, lost = [], [], 0
                    counts = []
                    for i in range(repeat):
                        channel, tick = f"{point[:12]}-{i}", recent_tick()
                        once.unlink()  # armed: the first process to reach the point dies
                        ledger.queue_tick(channel, tick)
                        send_tick(app, cfg, channel, tick)
                        if not wait(once.exists, 120):
                            lost += 1
                            once.touch()
                            continue
                        killed = once.stat().st_mtime
                        if kind == "worker":
                            wait(lambda: not procs[-1].alive(), 20, "the whole worker to be gone")
                            procs[-1].stop()
                            procs.append(worker(path, work / f"worker-{point}.log", point, kind, once))
                        finished = wait(lambda: done(ledger, channel, tick), lease_s * 4 / 3 + 180)
                        if finished:
                            c = count(ledger, channel, tick)
                            settle.append(round(c.finished_at.timestamp() - killed, 2))
                        time.sleep(1.0)  # room for a second run to start, if anything started one
                        c = count(ledger, channel, tick)
                        counts.append(c)
                        ended.append("settled" if "settled" in c.events else "reclaimed" if "reclaimed" in c.events
                                     else c.state or "none")
                        print(f"  {broker}/{kind}/{point} #{i}: {c.state}, posts {c.posts}, registrations "
                              f"{c.registrations}, runs {c.run_statuses}, {settle[-1] if finished else '—'} s, "
                              f"events {c.events}", flush=True)
                finally:
                    for p in procs:
                        p.stop()
                rows.append({
                    "broker": broker, "kind": kind, "point": point, "kills": len(counts), "kills_missed": lost,
                    "ticks": len(counts), "ticks_done": sum(c.state == "done" for c in counts),
                    "posts_per_tick": sorted({c.posts for c in counts}),
                    "registrations_per_tick": sorted({c.registrations for c in counts}),
                    "runs_left_running": sum(c.run_statuses.count("running") for c in counts),
                    "settle_s_median": round(statistics.median(settle), 2) if settle else None,
                    "settle_s_max": max(settle) if settle else None,
                    "ended": {k: ended.count(k) for k in sorted(set(ended))},
                })
                print(json.dumps(rows[-1]), flush=True)
        finally:
            lead.stop()
            ledger.engine.dispose()
    return rows


def table(rows: list[dict]) -> str:
    out = ["| kill point | broker | kind | ticks | posts/tick | registrations/tick | settle s (median / max) | ended |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per = lambda v: "/".join(str(x) for x in v) or "—"  # noqa: E731
        out.append(f"| {r['point']} | {r['broker']} | {r['kind']} | {r['ticks_done']}/{r['ticks']} | {per(r['posts_per_tick'])} | "
                   f"{per(r['registrations_per_tick'])} | {r['settle_s_median']} / {r['settle_s_max']} | "
                   + ", ".join(f"{k} {v}" for k, v in r["ended"].items()) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10, help="kills per point, broker and kind")
    parser.add_argument("--lease", type=int, default=30, help="[engine] lease_s")
    parser.add_argument("--brokers", default="redis,rabbitmq")
    parser.add_argument("--kinds", default="child,worker")
    parser.add_argument("--points", default=",".join(STEPS))
    args = parser.parse_args()
    fake = FakeLLM(delay_s=0.2).start()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    rows = [r for r in results.get("rows", [])]
    started = time.time()
    try:
        for broker in args.brokers.split(","):
            for kind in args.kinds.split(","):
                new = cell_rows(fake, broker, kind, args.points.split(","), args.repeat, args.lease)
                keep = {(r["broker"], r["kind"], r["point"]) for r in new}
                rows = [r for r in rows if (r["broker"], r["kind"], r["point"]) not in keep] + new
                results.update({"lease_s": args.lease, "repeat": args.repeat, "model_delay_s": 0.2, "rows": rows,
                                "bound_s": f"lease_s + lease_s/3 + one run = {args.lease * 4 / 3:.0f} s + one run"})
                RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    finally:
        fake.stop()
    print(f"\n{table(rows)}\n\n({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
