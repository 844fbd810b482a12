"""Benchmark: one full pipeline run on the embedded local model, and where its time goes.

    .venv/bin/python bench/bench_local.py [--runs 1] [--model local/qwen2.5-coder-1.5b]

Runs the shipped config.toml (its ledger and site redirected to a temporary
directory; the model assembled under ./var is reused), times every model call
by kind (agent decision, draft, humanize, other) and every capability, and
reports medians plus the ratio to the naive path measured before this work
(113 s: unconstrained prompts, full-length drafts). Target: <= 60 s on 2 cores.
Writes bench/results/local.json.
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
from pipeline.model.llm import ChatModel  # noqa: E402
from pipeline.run.events import RunObserver  # noqa: E402
from pipeline.run.runner import run_once  # noqa: E402

NAIVE_S = 113.0


class TimedModel(ChatModel):
    """ChatModel that notes the kind and duration of every call."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls: list[tuple[str, float, int | None]] = []

    def complete(self, messages, tools=None, response_format=None, max_tokens=None, **sampling):
        system = (messages[0].get("content") or "") if messages else ""
        kind = "decision" if tools else "humanize" if "editor" in system else "draft" if "You write articles" in system else "other"
        started = time.perf_counter()
        reply = super().complete(messages, tools=tools, response_format=response_format, max_tokens=max_tokens, **sampling)
        self.calls.append((kind, time.perf_counter() - started, reply.completion_tokens))
        if os.environ.get("BENCH_DEBUG"):
            print(f"{kind:9} {time.perf_counter() - started:5.1f}s prompt {reply.prompt_tokens} "
                  f"completion {reply.completion_tokens}", file=sys.stderr)
        return reply


def one_run(model: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PIPELINE_LLM__MODEL": model, "PIPELINE_LEDGER__URL": f"sqlite:///{tmp}/ledger.db",
               "PIPELINE_PUBLISH_LOCAL__DIR": f"{tmp}/site", "PIPELINE_REPORT__MARKDOWN_DIR": f"{tmp}/reports",
               "PIPELINE_DAEMON__STATE_DIR": str(REPO / "var")}
        cfg = config_mod.load(REPO / "config.toml", environ=env)
        llm = TimedModel(cfg.llm, data_dir=cfg.state_dir)
        steps: dict[str, float] = {}
        marks: dict[str, float] = {}

        class StepTimes(RunObserver):
            def tool_started(self, name: str) -> None:
                marks[name] = time.perf_counter()

            def tool_finished(self, name: str, ok: bool, payload: dict) -> None:
                steps[name] = steps.get(name, 0) + time.perf_counter() - marks[name]

        started = time.perf_counter()
        outcome = run_once(cfg, observer=StepTimes(), llm=llm)
        wall = time.perf_counter() - started
    by_kind: dict[str, float] = defaultdict(float)
    for kind, seconds, _ in llm.calls:
        by_kind[kind] += seconds
    return {"exit_code": outcome.exit_code, "status": outcome.status, "wall_s": round(wall, 1),
            "model_calls": len(llm.calls), "model_s_by_kind": {k: round(v, 1) for k, v in by_kind.items()},
            "capability_s": {k: round(v, 1) for k, v in steps.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    args = ap.parse_args()
    # Load the model once outside the timed runs, as the daemon does (load is reported separately).
    from pipeline.model.llm import _load_litellm
    t0 = time.perf_counter()
    _load_litellm()
    import_s = time.perf_counter() - t0
    from pipeline.model.local.provider import _load, register_local_provider

    register_local_provider(REPO / "var")
    t0 = time.perf_counter()
    _load()
    load_s = time.perf_counter() - t0
    runs = [one_run(args.model) for _ in range(args.runs)]
    walls = [r["wall_s"] for r in runs]
    median = statistics.median(walls)
    first = runs[0]
    result = {
        "model": args.model, "cpus": os.cpu_count(), "runs": runs,
        "import_litellm_s": round(import_s, 1), "model_load_s": round(load_s, 1),
        "median_run_s": median, "target_s": 60, "naive_s": NAIVE_S, "ratio_to_naive": round(median / NAIVE_S, 2),
        "share_of_first_run": {k: f"{100 * v / first['wall_s']:.0f}%" for k, v in first["model_s_by_kind"].items()},
        "all_exit_0": all(r["exit_code"] == 0 for r in runs),
    }
    (REPO / "bench" / "results" / "local.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
