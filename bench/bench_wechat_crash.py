"""The WeChat crash test at full strength: 20 kills per transition (or $PIPELINE_WECHAT_CRASH_ITERATIONS).

Runs tests/test_wechat_crash.py with the iteration count raised and writes its
per-transition figures (kills, submits, duplicates, forgotten tasks) to
bench/results/wechat_crash.txt. About a second per kill on 2 shared cores.

    .venv/bin/python bench/bench_wechat_crash.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    env = {**os.environ, "PIPELINE_WECHAT_CRASH_ITERATIONS": os.environ.get("PIPELINE_WECHAT_CRASH_ITERATIONS", "20")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/test_wechat_crash.py", "-q", "-p", "no:logging"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("wechat crash") or "passed" in line
             or "failed" in line]
    out = ROOT / "bench" / "results" / "wechat_crash.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
