"""Benchmark: 20 channels due at the same moment vs one channel alone.

Each model call is answered by the scripted server on 127.0.0.1 after 0.5 s,
so a run (7 agent turns + the draft and humanize calls) spends ~4.5 s waiting
on the model. With channels run concurrently by the daemon's thread pool, 20
runs should take little longer than one. Target: ratio <= 1.3.

    .venv/bin/python bench/bench_channels.py [--channels 20] [--delay 0.5] [--repeat 3]

Prints medians and writes bench/results/channels.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pipeline import config as config_mod  # noqa: E402
from pipeline.ops import daemon  # noqa: E402


def write_config(directory: Path, api_base: str, channels: int, executor: str) -> Path:
    lines = [f"""
[llm]
model = "openai/honest"
api_base = "{api_base}"
api_key_env = ""
[ledger]
url = "sqlite:///ledger.db"
[topic]
backlog = ""
[daemon]
state_dir = "state"
executor = "{executor}"
"""]
    for i in range(channels):
        lines.append(f'[[channels]]\nname = "ch{i:02d}"\ncron = "0 * * * *"\n')
    path = directory / "config.toml"
    path.write_text("\n".join(lines))
    return path


def finished(directory: Path) -> int:
    try:
        con = sqlite3.connect(directory / "ledger.db")
        try:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status != 'running'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def once(api_base: str, channels: int, executor: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = write_config(directory, api_base, channels, executor)
        cfg = config_mod.load(path)
        scheduler = daemon.build_scheduler(cfg, str(path))
        if cfg.daemon.executor == "process":
            daemon.warm(scheduler)  # as `pipeline daemon` does at start; not part of a tick
        now = datetime.now(timezone.utc)
        for job in scheduler.get_jobs():
            job.modify(next_run_time=now)
        cpu0 = time.process_time()
        started = time.perf_counter()
        scheduler.resume()
        while finished(directory) < channels:
            time.sleep(0.02)
        wall = time.perf_counter() - started
        if os.environ.get("BENCH_DEBUG"):
            print(channels, "runs: wall", round(wall, 2), "cpu of this process", round(time.process_time() - cpu0, 2), file=sys.stderr)
        scheduler.shutdown(wait=True)
        con = sqlite3.connect(directory / "ledger.db")
        statuses = dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        if os.environ.get("BENCH_DEBUG"):
            lat = con.execute("SELECT AVG(latency_ms), MAX(latency_ms), COUNT(*) FROM turns WHERE role='assistant'").fetchone()
            span = con.execute("SELECT MIN(started_at), MAX(started_at), MIN(finished_at), MAX(finished_at) FROM runs").fetchone()
            print(channels, "agent-turn latency avg/max ms, n:", lat, "spans:", span, file=sys.stderr)
        con.close()
        return wall, statuses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=20)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--executor", choices=["process", "thread"], default="process")
    args = ap.parse_args()
    # The model runs elsewhere in real life: serve it from another process so its CPU is not ours.
    server = subprocess.Popen([sys.executable, str(REPO / "tests" / "fakellm.py"), str(args.delay)],
                              stdout=subprocess.PIPE, text=True)
    fake = SimpleNamespace(api_base=server.stdout.readline().strip(), stop=server.terminate)
    once(fake.api_base, 1, args.executor)  # warm-up: imports litellm, fills caches
    single, many = [], []
    for _ in range(args.repeat):
        w, st = once(fake.api_base, 1, args.executor)
        assert st == {"done": 1}, st
        single.append(w)
        w, st = once(fake.api_base, args.channels, args.executor)
        assert st == {"done": args.channels}, st
        many.append(w)
    fake.stop()
    result = {
        "channels": args.channels, "executor": args.executor, "model_delay_s": args.delay, "repeat": args.repeat, "cpus": os.cpu_count(),
        "single_run_median_s": round(statistics.median(single), 2),
        "concurrent_runs_median_s": round(statistics.median(many), 2),
        "ratio": round(statistics.median(many) / statistics.median(single), 3),
        "target_ratio": 1.3,
    }
    (REPO / "bench" / "results" / f"channels-{args.executor}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
