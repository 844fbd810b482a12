"""``pipeline stats`` on a 10,000-run ledger: must answer in ≤ 1 s.

    .venv/bin/python bench/bench_stats.py [--runs 10000] [--repeat 7]

Builds a ledger with the real schema (``Ledger`` creates it) and rows shaped
like real runs — 7 assistant turns and 6 tool turns each, an execution per
tool call, a third of the runs with prose claims and nudges, a few stuck —
spread over four models and 30 days. Then times, median of ``--repeat``:
the whole command as an operator runs it (``pipeline stats --json`` in a
fresh process, start-up included) and ``model_stats`` alone in-process.
Writes bench/results/stats.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.ledger.utc import sqlite_text  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402

MODELS = ["openai/gpt-4o-mini", "deepseek/deepseek-chat", "ollama/qwen2.5:7b", "local/qwen2.5-coder-1.5b"]
CAPS = ["topic", "draft", "humanize", "publish", "register", "report"]


def _ts(t: datetime) -> str:
    return sqlite_text(t)  # as the ledger stores a time on SQLite


def build(path: Path, n_runs: int) -> dict[str, int]:
    Ledger(f"sqlite:///{path}").close()  # the real schema
    rng = random.Random(7)
    con = sqlite3.connect(path)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    runs, turns, execs, claims, guards = [], [], [], [], []
    turn_id = exec_id = 0
    for i in range(n_runs):
        model = MODELS[i % len(MODELS)]
        rid = f"r{i:06d}"
        t0 = start + timedelta(seconds=i * 259)  # ~30 days
        roll = rng.random()
        status, nudges = ("done", 0) if roll < 0.7 else ("hallucination", 2) if roll < 0.9 else ("incomplete", 2)
        runs.append((rid, "default", model, _ts(t0), _ts(t0 + timedelta(seconds=40)), status, 0, nudges, 1))
        seq = 0
        for k in range(7 + nudges):
            seq += 1
            turn_id += 1
            prose = k >= 6
            turns.append((turn_id, rid, seq, "assistant", "ok" if prose else None,
                          None if prose else '[{"id": "c"}]', model, model + "-served", 900, 60, rng.uniform(200, 4000),
                          _ts(t0 + timedelta(seconds=k * 5))))
            if not prose:
                cap = CAPS[k % len(CAPS)]
                exec_id += 1
                execs.append((exec_id, rid, turn_id, f"c{k}", cap, "{}", 1, '{"url": "u"}', _ts(t0), _ts(t0 + timedelta(seconds=2))))
                seq += 1
                turn_id += 1
                turns.append((turn_id, rid, seq, "tool", '{"ok": true}', None, None, None, None, None, None, _ts(t0)))
            elif status != "done":
                claims.append((rid, turn_id, "publish", "published at https://x/y", "https://x/y", "unbacked", _ts(t0)))
                guards.append((rid, turn_id, "hallucination" if status == "hallucination" else "text_tool_call", "nudge", k,
                               "nudge", _ts(t0)))
    con.executemany("INSERT INTO runs (id, channel, model, started_at, finished_at, status, exit_code, nudges, guard_enabled) "
                    "VALUES (?,?,?,?,?,?,?,?,?)", runs)
    con.executemany("INSERT INTO turns (id, run_id, seq, role, content, tool_calls_json, requested_model, served_model, "
                    "prompt_tokens, completion_tokens, latency_ms, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", turns)
    con.executemany("INSERT INTO executions (id, run_id, turn_id, call_id, capability, arguments_json, ok, result_json, "
                    "started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)", execs)
    con.executemany("INSERT INTO claims (run_id, turn_id, capability, text, value, status, created_at) VALUES (?,?,?,?,?,?,?)", claims)
    con.executemany("INSERT INTO guard_events (run_id, turn_id, kind, action, nudge_no, message, created_at) "
                    "VALUES (?,?,?,?,?,?,?)", guards)
    con.commit()
    con.close()
    return {"runs": len(runs), "turns": len(turns), "executions": len(execs), "claims": len(claims), "guard_events": len(guards)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        rows = build(db, args.runs)
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(f'[ledger]\nurl = "sqlite:///{db}"\n', encoding="utf-8")
        command = [sys.executable, "-m", "pipeline", "stats", "--json", "--config", str(cfg)]
        cold = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            proc = subprocess.run(command, capture_output=True, text=True, check=True)
            cold.append(time.perf_counter() - t)
        models = json.loads(proc.stdout)["models"]
        assert sum(m["runs"] for m in models) == args.runs

        from pipeline.ledger.reader import LedgerReader
        from pipeline.views.stats import model_stats

        warm = []
        for _ in range(args.repeat):
            reader = LedgerReader(f"sqlite:///{db}")
            t = time.perf_counter()
            model_stats(reader)
            warm.append(time.perf_counter() - t)
            reader.close()
    result = {"ledger": rows, "repeat": args.repeat,
              "command_median_s": round(statistics.median(cold), 3), "command_max_s": round(max(cold), 3),
              "query_median_s": round(statistics.median(warm), 3), "limit_s": 1.0,
              "within_limit": statistics.median(cold) <= 1.0}
    out = REPO / "bench" / "results" / "stats.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
