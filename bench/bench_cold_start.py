"""Cold start of the read commands: each in a fresh process, median of 7 (target ≤ 0.5 s).

    .venv/bin/python bench/bench_cold_start.py [--repeat 7]

A project with a 200-run ledger (bench_stats.build) in a temporary
directory; every command runs as an operator types it. Wall time depends on
what else the machine is doing, so the CPU time the process used (user+sys)
and the load average (before and after each command's runs, and ``uptime``
at the start and the end) are recorded beside it. Writes
bench/results/cold_start.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

from bench_stats import build  # noqa: E402

COMMANDS = [
    ["--help"], ["ledger", "diff"], ["ledger", "diff", "--json"], ["ledger", "runs"], ["ledger", "show"],
    ["ledger", "show", "--json"], ["claims", "check", "Published at https://example.com/a and registered as CT-20260101-001."],
    ["stats"], ["status"], ["report"],
]


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    exe = str(Path(sys.executable).with_name("pipeline"))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        build(project / "ledger.db", 200)
        (project / "config.toml").write_text('[ledger]\nurl = "sqlite:///ledger.db"\n', encoding="utf-8")
        load_before = os.getloadavg()[0]
        uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        for cmd in COMMANDS:
            timed([exe, *cmd], project)  # warm the page cache: "cold" means a new process, not a cold disk
            load = os.getloadavg()[0]
            walls, cpus = zip(*(timed([exe, *cmd], project) for _ in range(args.repeat)), strict=True)
            results[" ".join(cmd[:3] if cmd[0] != "claims" else cmd[:2])] = {
                "wall_median_s": round(statistics.median(walls), 3), "cpu_median_s": round(statistics.median(cpus), 3),
                "wall_min_s": round(min(walls), 3), "load_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}
    summary = {"repeat": args.repeat, "target_s": 0.5, "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
               "uptime": [uptime_before, subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()],
               "cpu_count": os.cpu_count(), "commands": results}
    (REPO / "bench" / "results" / "cold_start.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
