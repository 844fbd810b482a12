"""Real-model guard check: the unconstrained local model (``local-raw``) must never pass unpublished.

    .venv/bin/python bench/bench_raw_guard.py [--runs 5]

Each run uses the shipped config with ``local-raw/qwen2.5-coder-1.5b``: the
model gets the tools through its chat template only, and mostly writes tool
calls or made-up results as text — the incident. Counts outcomes, what the
guard caught (claims by verdict, text tool calls, nudges) and asserts that no
run exited 0 without a verified publication. Writes bench/results/raw_guard.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pipeline import config as config_mod  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402
from pipeline.run.runner import run_once  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    outcomes, claims, events, escaped = Counter(), Counter(), Counter(), 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = config_mod.load(REPO / "config.toml", environ={
                **os.environ, "PIPELINE_LLM__MODEL": "local-raw/qwen2.5-coder-1.5b",
                "PIPELINE_LEDGER__URL": f"sqlite:///{tmp}/ledger.db", "PIPELINE_PUBLISH_LOCAL__DIR": f"{tmp}/site",
                "PIPELINE_REPORT__MARKDOWN_DIR": f"{tmp}/reports", "PIPELINE_DAEMON__STATE_DIR": str(REPO / "var")})
            ledger = Ledger(cfg.ledger_url)
            outcome = run_once(cfg, ledger=ledger)
            published = any(f.capability == "publish" for f in ledger.facts(outcome.run_id))
            escaped += outcome.exit_code == 0 and not published
            outcomes[f"{outcome.status} (exit {outcome.exit_code})"] += 1
            claims.update(f"{c.capability} {c.status}" for c in ledger.claims(outcome.run_id))
            events.update(f"{g.kind} {g.action}" for g in ledger.guard_events(outcome.run_id))
            print(outcome.run_id, outcome.status, outcome.exit_code, "published" if published else "not published", flush=True)
            ledger.close()
    result = {"model": "local-raw/qwen2.5-coder-1.5b", "runs": args.runs, "outcomes": dict(outcomes),
              "exit_0_without_verified_publication": escaped, "claims": dict(claims), "guard_events": dict(events)}
    (REPO / "bench" / "results" / "raw_guard.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    sys.exit(1 if escaped else 0)


if __name__ == "__main__":
    main()
