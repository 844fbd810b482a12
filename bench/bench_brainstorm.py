"""Benchmark: the embedded model end to end, shipped config, no backlog (topics are brainstormed).

Since issue 48 a brainstormed topic has no source, and a topic with no source is not drafted: each run now ends
exit 4 after ``topic`` with the line saying how to give it sources. The bench measures that path (the start, the
brainstorm, the refusal), not articles; ``bench_articles.py`` measures those.

    .venv/bin/python bench/bench_brainstorm.py [--runs 20] [--timeout 300] [--model local/qwen2.5-coder-1.5b]

Each run is a fresh process, ``pipeline run --config <tmp>/config.toml``, where
``<tmp>`` holds a copy of the shipped ``config.toml`` and nothing else: no
``topics.txt``, so ``topic`` brainstorms. The ledger, site and reports land in
``<tmp>``; only the assembled model under ``./var`` is shared
(``PIPELINE_DAEMON__STATE_DIR``). The wall time is the whole process: Python
start, litellm import, model load and the run.

Per run it reports the exit code, status and the guard's reason, assistant
turns, nudges, failed tool calls, wall time, the load average (the machine may
be shared) and whether the ledger holds a verified publication and a
registration — an exit 0 without both is a violation and is counted — and how
much the published rewrite differs from its draft (difflib ratio of the stored
bodies; 1.0 is a verbatim copy) with the copies humanize rejected.
Writes bench/results/brainstorm.json.

Targets (issue 12): >= 18 of 20 exit 0, no exit 0 without a verified
publication and a registration, median wall time <= 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sqlmodel import select  # noqa: E402

from pipeline.ledger.models import Publication, Registration  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402


def one_run(i: int, model: str, timeout: float, keep_failed: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-brainstorm-") as tmp:
        config = Path(tmp) / "config.toml"
        shutil.copy(REPO / "config.toml", config)
        env = {**os.environ, "PIPELINE_LLM__MODEL": model, "PIPELINE_DAEMON__STATE_DIR": str(REPO / "var"),
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(config)], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout)
            code, tail = proc.returncode, (proc.stderr or "").strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            code, tail = None, [f"killed after {timeout:.0f} s"]
        wall = time.perf_counter() - started
        row = {"run": i, "exit_code": code, "wall_s": round(wall, 1), "load_avg_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
               "stderr_tail": tail[0][:200] if tail else ""}
        db = Path(tmp) / "var" / "ledger.db"
        if not db.exists():
            return row
        if keep_failed is not None and code != 0:  # for `pipeline ledger show --config …` afterwards
            keep_failed.mkdir(parents=True, exist_ok=True)
            shutil.copytree(Path(tmp) / "var", keep_failed / f"run-{i}" / "var", ignore=shutil.ignore_patterns("*.lock"),
                            dirs_exist_ok=True)
            shutil.copy(config, keep_failed / f"run-{i}" / "config.toml")
        ledger = Ledger(f"sqlite:///{db}")
        try:
            run = ledger.get_run(None)
            if run is None:
                return row
            turns = ledger.turns(run.id)
            executions = ledger.executions(run.id)
            events = ledger.guard_events(run.id)
            with ledger.read() as s:
                verified = s.exec(select(Publication).where(Publication.run_id == run.id, Publication.status == "verified")).all()
                registered = s.exec(select(Registration).where(Registration.run_id == run.id)).all()
            topic = next((e for e in executions if e.capability == "topic" and e.ok), None)
            row.update({
                "status": run.status, "reason": next((g.kind for g in reversed(events) if g.action == "fail"), None),
                "turns": sum(1 for t in turns if t.role == "assistant"), "nudges": run.nudges,
                "nudge_kinds": [g.kind for g in events if g.action == "nudge"],
                "failed_calls": [e.capability for e in executions if e.ok is False],
                "humanize_scores": [json.loads(e.result_json or "{}").get("score") for e in executions if e.capability == "humanize" and e.ok],
                # Measured here from the stored texts, not taken from the capability's own result.
                "rewrite_similarity": _rewrite_similarity(ledger, run.id),
                "copies_rejected": sum(1 for e in executions if e.capability == "humanize" for a in _attempts(e)
                                       if "the draft's text" in (a.get("rejected") or "")),
                "verified_publication": bool(verified), "registration": bool(registered),
                "topic": json.loads(topic.result_json or "{}").get("title") if topic else None,
                "error": (run.error or "")[:200] or None,
            })
        finally:
            ledger.close()
        return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=300, help="kill a run after this many seconds (counted as a failure)")
    ap.add_argument("--model", default="local/qwen2.5-coder-1.5b")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "brainstorm.json"))
    ap.add_argument("--keep-failed", type=Path, default=None,
                    help="copy the state (ledger, site, reports) of each run that did not exit 0 into DIR/run-N")
    args = ap.parse_args()
    rows: list[dict] = []
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"{'run':>3} {'exit':>4} {'status':<13} {'reason':<17} {'turns':>5} {'nudges':>6} {'wall s':>7} {'load':>9}  failed calls", flush=True)
    for i in range(1, args.runs + 1):
        try:
            r = one_run(i, args.model, args.timeout, args.keep_failed)
        except KeyboardInterrupt:  # stopped (timeout, ^C): summarise the runs that completed
            break
        rows.append(r)
        print(f"{i:>3} {r['exit_code']!s:>4} {r.get('status') or '-':<13} {r.get('reason') or '-':<17} {r.get('turns', '-'):>5} "
              f"{r.get('nudges', '-'):>6} {r['wall_s']:>7} {r['load_avg_1m'][0]:>4}/{r['load_avg_1m'][1]:<4}  "
              f"{','.join(r.get('failed_calls') or []) or '-'}", flush=True)
        Path(args.out).write_text(json.dumps({"runs": rows}, indent=2, ensure_ascii=False) + "\n")
    summary = summarise(rows, args.model, args.runs)
    Path(args.out).write_text(json.dumps({"summary": summary, "runs": rows}, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


def _attempts(execution) -> list[dict]:
    return json.loads(execution.result_json or "{}").get("attempts") or []


def _rewrite_similarity(ledger: Ledger, run_id: str) -> float | None:
    """difflib ratio of the published rewrite's body to its draft's (1.0: a verbatim copy)."""
    from pipeline.capabilities.humanize import similarity
    from pipeline.ledger.models import Article

    with ledger.read() as s:
        rewrite = s.exec(select(Article).where(Article.run_id == run_id, Article.kind == "humanized")
                         .order_by(Article.id.desc())).first()  # type: ignore[union-attr]
        draft = s.get(Article, rewrite.parent_id) if rewrite is not None else None
    if rewrite is None or draft is None:
        return None
    return round(similarity(draft.body, rewrite.body), 3)


def summarise(rows: list[dict], model: str, planned: int) -> dict:
    walls = [r["wall_s"] for r in rows]
    exit0 = [r for r in rows if r["exit_code"] == 0]
    violations = [r["run"] for r in exit0 if not (r.get("verified_publication") and r.get("registration"))]
    sims = [r["rewrite_similarity"] for r in rows if r.get("rewrite_similarity") is not None]
    return {
        "model": model, "runs": len(rows), "planned_runs": planned, "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "exit_codes": {str(c): sum(1 for r in rows if r["exit_code"] == c) for c in sorted({r["exit_code"] for r in rows}, key=str)},
        "exit_0": len(exit0), "exit_0_without_publication_and_registration": violations,
        "median_wall_s": statistics.median(walls) if walls else None, "max_wall_s": max(walls) if walls else None,
        "median_turns": statistics.median([r["turns"] for r in rows if "turns" in r] or [0]),
        "total_nudges": sum(r.get("nudges") or 0 for r in rows),
        "rewrite_similarity_median": statistics.median(sims) if sims else None,
        "rewrite_similarity_max": max(sims) if sims else None,
        "copies_rejected": sum(r.get("copies_rejected") or 0 for r in rows),
        "targets": {"exit_0_at_least": 18 * len(rows) / 20, "median_wall_s_at_most": 60},
    }


if __name__ == "__main__":
    raise SystemExit(main())
