"""Runs the benchmarks in bench/ (``make bench``): by default the quick ones, each at its own defaults.

    .venv/bin/python bench/run_bench.py             # the default set (no model, no servers; ~1.5 min)
    .venv/bin/python bench/run_bench.py --list      # every benchmark, what it needs, how long it takes
    .venv/bin/python bench/run_bench.py stats topic # these only
    .venv/bin/python bench/run_bench.py channels -- --channels 5   # one, with its own arguments

Each benchmark is its own script and writes its figures under bench/results/ as when run by
hand; this runs them one after another, each in a fresh process, and prints how long each took
and whether it passed. It exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    needs: str  # what it needs beyond the project venv
    takes: str  # how long at its defaults, roughly, on 2 shared cores
    quick: bool = False  # in the default set
    args: tuple[str, ...] = ()


BENCHES = [
    Bench("claims", "bench_claims.py", "nothing", "seconds", quick=True),
    Bench("validate", "bench_validate.py", "nothing", "~10 s", quick=True),
    Bench("ledger_open", "bench_ledger_open.py", "nothing", "~5 s", quick=True),
    Bench("cold_start", "bench_cold_start.py", "nothing", "~45 s", quick=True),
    Bench("stats", "bench_stats.py", "nothing", "~10 s", quick=True),
    Bench("topic", "bench_topic.py", "nothing", "~20 s", quick=True),
    Bench("channels", "bench_channels.py", "nothing (the scripted model)", "a few min"),
    Bench("deadlines", "bench_deadlines.py", "nothing (local stuck servers)", "several min"),
    Bench("wechat_crash", "bench_wechat_crash.py", "nothing (the WeChat fake)", "~2 min per transition"),
    Bench("torture", "torture.py", "the real-WordPress tier for its wordpress target", "long (100 kills per target)"),
    Bench("scaleout", "bench_scaleout.py", "PostgreSQL, Redis, RabbitMQ on 127.0.0.1", "long", args=("load",)),
    Bench("local", "bench_local.py", "the local extra (model weights)", "minutes per run"),
    Bench("local_probe", "local_probe.py", "the local extra (model weights)", "~1 min"),
    Bench("raw_guard", "bench_raw_guard.py", "the local extra (model weights)", "long"),
    Bench("brainstorm", "bench_brainstorm.py", "the local extra (model weights)", "long (20 runs)"),
    Bench("articles", "bench_articles.py", "the local extra (model weights)", "~1 h (10 runs, 5 en + 5 zh)"),
    Bench("memory", "bench_memory.py", "the local extra (model weights)", "~1.5 min"),
    Bench("speculative", "bench_speculative.py", "the local extra (model weights)", "~2 min",
          args=("--draft", "var/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")),
    Bench("score_lofo", "score_lofo.py", "the cached features (score_corpus.py, score_binoculars.py: the local extra)",
          "~15 s from the caches"),
    Bench("site_screenshots", "site_screenshots.py", "Debian chromium, fonts-noto-cjk", "< 1 min"),
]
BY_NAME = {b.name: b for b in BENCHES}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Arguments after -- go to the benchmark (with exactly one named).")
    ap.add_argument("names", nargs="*", help=f"benchmarks to run (default: {', '.join(b.name for b in BENCHES if b.quick)})")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = ap.parse_args(argv)

    if args.list:
        for b in BENCHES:
            print(f"{b.name:17} {'default' if b.quick else '':8} {b.takes:28} needs: {b.needs}   (bench/{b.script})")
        return 0
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)} (--list shows them)")
    chosen = [BY_NAME[n] for n in args.names] or [b for b in BENCHES if b.quick]
    if extra and len(chosen) != 1:
        ap.error("arguments after -- need exactly one benchmark named")

    outcomes: list[tuple[str, int, float]] = []
    for b in chosen:
        cmd = [sys.executable, str(BENCH / b.script), *b.args, *extra]
        print(f"\n=== {b.name}: {' '.join(cmd[1:])}", flush=True)
        started = time.monotonic()
        code = subprocess.run(cmd, cwd=REPO).returncode
        outcomes.append((b.name, code, time.monotonic() - started))

    print("\n=== summary")
    for name, code, took in outcomes:
        print(f"{name:17} {'ok' if code == 0 else f'FAILED (exit {code})':18} {took:7.1f} s")
    return 0 if all(code == 0 for _, code, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
