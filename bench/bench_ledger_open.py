"""Cost of opening an up-to-date ledger, and the cold start of `pipeline ledger diff`.

    python bench/bench_ledger_open.py [--baseline-src DIR]

Open: the median of 101 opens (engine, first connection, schema step) with today's
migration fast path (one SELECT of alembic_version) against the 0.1.0 open
(create_all inside BEGIN IMMEDIATE), on the same up-to-date ledger.
Cold start: median of 7 `python -m pipeline ledger diff --json` processes; with
--baseline-src (a checkout of an earlier commit) the same command from that tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlmodel import SQLModel

from pipeline.ledger import models  # noqa: F401
from pipeline.ledger.writer import Ledger

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "ledger-0.1.0.db"


def open_0_1_0(url: str) -> Ledger:
    ledger = Ledger(url, migrate=False)
    with ledger.engine.connect() as conn, conn.execution_options(ledger_write=True).begin():
        SQLModel.metadata.create_all(conn)
    return ledger


def median_ms(fn, url: str, n: int = 101) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        ledger = fn(url)
        times.append((time.perf_counter() - t0) * 1000)
        ledger.engine.dispose()
    return statistics.median(times)


def cold_start_s(cwd: Path, pythonpath: str | None, n: int = 7) -> float:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pipeline", "ledger", "diff", "--json"], cwd=cwd, env=env,
                       capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-src", type=Path, help="checkout of an earlier commit to compare the cold start with")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    shutil.copy(FIXTURE, work / "ledger.db")
    url = f"sqlite:///{work}/ledger.db"
    Ledger(url).close()  # migrate once: the bench measures an up-to-date ledger
    (work / "config.toml").write_text('[ledger]\nurl = "sqlite:///ledger.db"\n[llm]\nmodel = "openai/x"\napi_key_env = ""\n')

    old, new = median_ms(open_0_1_0, url), median_ms(Ledger, url)
    result = {"open_ms_0_1_0": round(old, 2), "open_ms_now": round(new, 2), "open_delta_ms": round(new - old, 2),
              "diff_cold_start_s_now": round(cold_start_s(work, None), 3)}
    if args.baseline_src:
        # The ledger is now at HEAD; the old code opens it with create_all, which ignores the extra column.
        result["diff_cold_start_s_baseline"] = round(cold_start_s(work, str(args.baseline_src)), 3)
    print(json.dumps(result, indent=2))
    out = REPO / "bench" / "results" / "ledger_open.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
