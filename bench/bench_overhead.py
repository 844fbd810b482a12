"""Benchmark: run overhead on the embedded model = a run's wall time ÷ the sum of its model calls' latencies.

    nice -n 5 .venv/bin/python bench/bench_overhead.py [--runs 1] [--model local/qwen2.5-coder-1.5b]

Runs the shipped config.toml in-process (ledger, site and reports redirected to a temporary directory;
the model assembled under ./var is reused), after loading litellm and the model once, as the daemon
does (both are reported apart: they are the process's cost, paid once, not a run's). Everything is read
back from the ledger, as ``ledger show`` totals it: the run's wall time (``runs.started_at`` →
``finished_at``) and every model call — the agent's turns and the capabilities' own calls
(``model_calls``: draft, humanize, brainstorm). Also reported: the wall time around ``run_once``, and
where the rest goes (per capability: its execution time minus its own model calls). Target: ≤ 1.15.
Writes bench/results/overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pipeline import config as config_mod  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402
from pipeline.run.runner import run_once  # noqa: E402

TARGET = 1.15


def one_run(model: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PIPELINE_LLM__MODEL": model, "PIPELINE_LEDGER__URL": f"sqlite:///{tmp}/ledger.db",
               "PIPELINE_PUBLISH_LOCAL__DIR": f"{tmp}/site", "PIPELINE_REPORT__MARKDOWN_DIR": f"{tmp}/reports",
               "PIPELINE_DAEMON__STATE_DIR": str(REPO / "var")}
        cfg = config_mod.load(REPO / "config.toml", environ=env)
        started = time.perf_counter()
        outcome = run_once(cfg)
        around_s = time.perf_counter() - started
        ledger = Ledger(cfg.ledger_url)
        run = ledger.get_run(outcome.run_id)
        turns = [t for t in ledger.turns(run.id) if t.role == "assistant"]
        side = ledger.model_calls(run.id)
        executions = ledger.executions(run.id)
        ledger.close()
    model_ms = sum(t.latency_ms or 0 for t in turns) + sum(c.latency_ms or 0 for c in side)
    wall_ms = (run.finished_at - run.started_at).total_seconds() * 1000
    in_model: dict[int | None, float] = defaultdict(float)
    for c in side:
        in_model[c.execution_id] += c.latency_ms or 0
    outside: dict[str, float] = defaultdict(float)  # per capability: its time not spent in the model
    for e in executions:
        if e.finished_at is not None:
            outside[e.capability] += (e.finished_at - e.started_at).total_seconds() * 1000 - in_model[e.id]
    return {"run_id": run.id, "status": outcome.status, "exit_code": outcome.exit_code,
            "wall_s": round(wall_ms / 1000, 2), "around_run_once_s": round(around_s, 2),
            "model_s": round(model_ms / 1000, 2), "overhead": round(wall_ms / model_ms, 3) if model_ms else None,
            "overhead_around_run_once": round(around_s * 1000 / model_ms, 3) if model_ms else None,
            "model_turns": len(turns), "side_calls": len(side),
            "side_calls_by_capability": {k: sum(1 for c in side if c.capability == k) for k in sorted({c.capability for c in side})},
            "tokens": {"prompt": sum((c.prompt_tokens or 0) for c in [*turns, *side]),
                       "completion": sum((c.completion_tokens or 0) for c in [*turns, *side])},
            "not_in_model_s": round((wall_ms - model_ms) / 1000, 2),
            "capability_time_outside_model_s": {k: round(v / 1000, 2) for k, v in sorted(outside.items())}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    args = ap.parse_args()
    from pipeline.model.llm import _load_litellm

    t0 = time.perf_counter()
    _load_litellm()
    import_s = time.perf_counter() - t0
    from pipeline.model.local.provider import _load, register_local_provider

    register_local_provider(REPO / "var")
    t0 = time.perf_counter()
    _load()
    load_s = time.perf_counter() - t0
    runs = []
    for _ in range(args.runs):
        runs.append(one_run(args.model))
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    ratios = [r["overhead"] for r in runs if r["overhead"]]
    result = {"model": args.model, "cpus": len(os.sched_getaffinity(0)), "load_average_at_end": os.getloadavg(),
              "import_litellm_s": round(import_s, 1), "model_load_s": round(load_s, 1),
              "target": TARGET, "median_overhead": statistics.median(ratios) if ratios else None,
              "all_within_target": bool(ratios) and all(r <= TARGET for r in ratios), "runs": runs}
    (REPO / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (REPO / "bench" / "results" / "overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
