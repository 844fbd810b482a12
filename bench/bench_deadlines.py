"""Stuck dependencies, measured (issue 14, items 3 and 4).

    .venv/bin/python bench/bench_deadlines.py [--tries 20] [--deadline 10]

Each try is a real ``pipeline run`` process against a server on 127.0.0.1 (tests/stuck.py):

* ``deadline``: a provider trickling one byte every 0.5 s, ``timeout_s = 10``, ``max_retries = 3``,
  ``call_deadline_s = --deadline``: seconds from the first request reaching the server to the
  process's exit (the issue: > 120 s), and the exit code (5 expected).
* ``sigterm``: SIGTERM once the model call is in flight (alternately a silent and a trickling
  provider) or once the platform call is in flight (a silent webhook receiver; the model is the
  scripted fake): seconds from the signal to the process's exit, the exit code and the run's
  status in the ledger (130 and ``interrupted`` expected; the issue: 45 s and exit 5, or > 90 s).

Writes bench/results/deadlines.json; exits 1 if any SIGTERM took longer than 2 s, any deadline
run ended later than deadline + 5 s, or an exit code or run status is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fakellm import FakeLLM  # noqa: E402
from stuck import StuckServer, wait_for_request  # noqa: E402
from support import KEY_ENV, write_config  # noqa: E402


def config(directory: Path, api_base: str, model: str, llm_extra: str = "", extra: str = "") -> Path:
    # Pauses of 1 s between retries: a SIGTERM must also end a run that is waiting to retry.
    return write_config(directory, api_base, model.removeprefix("openai/"), extra, backoff_s=1.0, llm_extra=llm_extra)


def spawn(directory: Path, cfg: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--config", str(cfg)], cwd=directory,
                            env={**os.environ, KEY_ENV: "sk-bench"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_status(directory: Path) -> str | None:
    con = sqlite3.connect(directory / "ledger.db")
    try:
        row = con.execute("SELECT status FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        return row[0] if row else None
    finally:
        con.close()


def deadline_try(deadline_s: float) -> dict:
    srv = StuckServer("trickle", 0.5).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            proc = spawn(d, config(d, f"{srv.base_url}/v1", "openai/x", f"call_deadline_s = {deadline_s}"))
            if not wait_for_request(srv, timeout_s=120):
                proc.kill()
                return {"error": "no request"}
            first = time.monotonic()
            code = proc.wait(timeout=600)
            return {"seconds": round(time.monotonic() - first, 2), "exit": code, "status": run_status(d)}
    finally:
        srv.stop()


def sigterm_try(kind: str, fake: FakeLLM) -> dict:
    srv = StuckServer("silent" if kind != "model-trickle" else "trickle", 0.5).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            if kind == "platform-silent":
                cfg = config(d, fake.api_base, "openai/honest", extra=f"""
[publish]
target = "webhook"
allowed_domains = ["127.0.0.1"]
timeout_s = 60

[publish.webhook]
url = "{srv.base_url}/hook"
""")
            else:
                cfg = config(d, f"{srv.base_url}/v1", "openai/x")
            proc = spawn(d, cfg)
            if not wait_for_request(srv, timeout_s=180):
                proc.kill()
                return {"kind": kind, "error": "the call never started"}
            time.sleep(0.2)  # well inside the call
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "killed after 120 s"
            return {"kind": kind, "seconds": round(time.monotonic() - sent, 3), "exit": code, "status": run_status(d)}
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=20, help="SIGTERM tries")
    ap.add_argument("--deadline-tries", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=10.0)
    args = ap.parse_args()
    fake = FakeLLM().start()
    kinds = ["model-silent", "model-trickle", "platform-silent"]
    sigterms = []
    for i in range(args.tries):
        r = sigterm_try(kinds[i % len(kinds)], fake)
        print(json.dumps(r), flush=True)
        sigterms.append(r)
    deadlines = []
    for _ in range(args.deadline_tries):
        r = deadline_try(args.deadline)
        print(json.dumps({"deadline": args.deadline, **r}), flush=True)
        deadlines.append(r)
    fake.stop()
    secs = [r["seconds"] for r in sigterms if "seconds" in r]
    ok_sig = all(r.get("exit") == 130 and r.get("status") == "interrupted" and r["seconds"] <= 2 for r in sigterms)
    ok_dl = all(r.get("exit") == 5 and r["seconds"] <= args.deadline + 5 for r in deadlines)
    summary = {
        "sigterm": {"tries": len(sigterms), "max_s": max(secs, default=None), "median_s": statistics.median(secs) if secs else None,
                    "all_exit_130_interrupted": all(r.get("exit") == 130 and r.get("status") == "interrupted" for r in sigterms),
                    "runs": sigterms},
        "trickling_provider": {"call_deadline_s": args.deadline, "runs": deadlines,
                               "max_s_after_first_request": max((r.get("seconds", 0) for r in deadlines), default=None)},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    (REPO / "bench" / "results" / "deadlines.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"SIGTERM: {len(secs)} tries, median {summary['sigterm']['median_s']} s, max {summary['sigterm']['max_s']} s; "
          f"trickling provider: ends {summary['trickling_provider']['max_s_after_first_request']} s after its first "
          f"request (deadline {args.deadline} s)")
    return 0 if ok_sig and ok_dl else 1


if __name__ == "__main__":
    sys.exit(main())
