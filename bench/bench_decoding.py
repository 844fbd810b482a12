"""Benchmark: the embedded model's decoding settings, on the requests a real run made (issue 22's time and memory).

    .venv/bin/python bench/bench_decoding.py --ledger var/ledger.db [--modes off,ngram-simple,kv-q8] [--calls 12]

Replays the capability calls (draft parts and rewrites) that one run recorded in its ledger (``model_calls``: the
messages sent, the tokens answered), each mode in its own process with the server the pipeline ships
(``provider.server_params``) changed only as the mode says:

* ``shipped``: ``provider.server_params`` as it is (KV cache in Q8_0, n-gram drafts of ``provider.NGRAM_DRAFT``);
* ``before``: the server before these measurements: F16 KV cache, no speculative decoding;
* ``ngram-simple`` / ``ngram-map-k`` / ``ngram-mod``: llama.cpp's self-speculative decoding, drafts looked up in the
  token history of the request (prompt and reply so far; no draft model, so nothing competes for the two cores:
  the 0.5B draft model measured 0.29x, bench/bench_speculative.py);
* ``kv-q8``: the KV cache in Q8_0 (flash attention on) instead of F16, for memory;
* ``MODE+scorer``: MODE, with the scoring model loaded and an article's paragraphs scored before each call, as a run
  does between its rewrites. With the scorer's llama.cpp in this process (before 2026-12-06):
  bench/results/decoding-scorer-inprocess.json, 0.80x; in its own process (``pipeline.model.local.scorer_process``;
  its memory is not in this process's peak): bench/results/decoding-scorer.json, 1.01x.

Each call is decoded with the run's own sampling (draft parts at ``[llm] temperature``, rewrites at ``[humanize]
temperature`` with the DRY sampler they are sent with) and capped at the tokens the run's call produced, so
every mode generates about the same amount of text. Reported per mode: generated tokens per second of wall
time, llama.cpp's draft acceptance, and the process's peak RSS. Writes bench/results/decoding.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

MODES = ("before", "ngram-simple", "ngram-map-k", "ngram-mod", "kv-q8", "shipped", "shipped+scorer")


def calls_of(ledger: Path, limit: int) -> list[dict]:
    db = sqlite3.connect(ledger)
    rows = db.execute("SELECT capability, messages_json, completion_tokens FROM model_calls WHERE capability IN "
                      "('draft', 'humanize') AND messages_json IS NOT NULL AND completion_tokens > 0 ORDER BY id").fetchall()
    return [{"capability": c, "messages": json.loads(m), "tokens": int(n)} for c, m, n in rows][:limit]


def configure(p, mode: str, draft_max: int) -> None:
    import xllamacpp

    kinds = xllamacpp.common_speculative_type
    if mode == "shipped":
        return
    # Every other mode starts from the server before this bench: F16 KV cache, no speculative decoding.
    p.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NONE]
    p.cache_type_k = p.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F16
    p.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_AUTO
    if mode.startswith("ngram-"):
        kind = {"ngram-simple": kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE,
                "ngram-map-k": kinds.COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K,
                "ngram-mod": kinds.COMMON_SPECULATIVE_TYPE_NGRAM_MOD}[mode]
        p.speculative.types = [kind]
        p.speculative.draft.n_max = draft_max
        if mode in ("ngram-simple", "ngram-map-k"):
            params = getattr(p.speculative, mode.replace("-", "_"))
            params.size_n, params.size_m = 3, draft_max
    elif mode == "kv-q8":
        q8 = xllamacpp.ggml_type.GGML_TYPE_Q8_0
        p.cache_type_k = p.cache_type_v = q8
        p.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED


def child(mode: str, ledger: Path, limit: int, draft_max: int) -> dict:
    import xllamacpp
    from bench_speculative import _stream

    from pipeline import config as config_mod
    from pipeline.model.local import assets, provider

    settings = config_mod.load(REPO / "config.toml")
    base, _, scored = mode.partition("+")
    p = provider.server_params(assets.model_path(REPO / "var"))
    configure(p, base, draft_max)
    server = xllamacpp.Server(p)
    calls = calls_of(ledger, limit)
    scorer = None
    if scored:
        from pipeline.score import scoring

        scorer = scoring.ModelScorer(REPO / "var")
        paragraphs = [m["content"] for c in calls for m in c["messages"] if m["role"] == "user"]
    out = []
    for i, call in enumerate(calls):
        if scorer is not None:  # a fresh set of texts each time: the scorer's cache would skip a repeat
            scorer._prefetch([f"{i}. {t}" for t in paragraphs[:6]], "en")
        req = {"messages": call["messages"], "max_tokens": call["tokens"], "seed": 100 + i,
               "id_slot": provider.SLOTS["capability"]}
        if call["capability"] == "humanize":
            req.update(temperature=settings.humanize.temperature, **provider.FRESH_WORDING)
        else:
            req["temperature"] = settings.llm.temperature
        t0 = time.perf_counter()
        resp = _stream(server, req)
        wall = time.perf_counter() - t0
        timings = resp.get("timings") or {}
        usage = resp.get("usage") or {}
        out.append({"capability": call["capability"], "completion_tokens": usage.get("completion_tokens", 0),
                    "prompt_tokens": usage.get("prompt_tokens", 0), "wall_s": round(wall, 2),
                    "draft_n": timings.get("draft_n"), "draft_n_accepted": timings.get("draft_n_accepted")})
        print(mode, out[-1], file=sys.stderr, flush=True)
    return {"mode": mode, "calls": out, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def summarise(res: dict) -> dict:
    calls = res["calls"]
    tokens = sum(c["completion_tokens"] for c in calls)
    wall = sum(c["wall_s"] for c in calls)
    drafted = sum(c["draft_n"] or 0 for c in calls)
    summary = {"calls": len(calls), "completion_tokens": tokens, "wall_s": round(wall, 1),
               "tokens_per_s": round(tokens / wall, 2) if wall else None,
               "median_call_tokens_per_s": statistics.median(c["completion_tokens"] / c["wall_s"] for c in calls if c["wall_s"]),
               "peak_rss_mb": res["peak_rss_mb"]}
    if drafted:
        summary["draft_tokens"] = drafted
        summary["acceptance_rate"] = round(sum(c["draft_n_accepted"] or 0 for c in calls) / drafted, 3)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledger", type=Path, required=True)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--child")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "decoding.json")
    args = ap.parse_args()
    if args.child:
        sys.stdout.write(json.dumps(child(args.child, args.ledger, args.calls, args.draft_max)) + "\n")
        return
    results = {}
    for mode in args.modes.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", mode, "--ledger", str(args.ledger), "--calls",
                               str(args.calls), "--draft-max", str(args.draft_max)], capture_output=True, text=True, check=False)
        if proc.returncode:
            sys.exit(f"error: mode {mode} failed: {proc.stderr[-2000:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        res["summary"] = summarise(res)
        results[mode] = res
        print(mode, json.dumps(res["summary"]), file=sys.stderr, flush=True)
    base = results.get("before", {}).get("summary", {}).get("tokens_per_s")
    report = {"model": "qwen2.5-coder-1.5b-instruct-q4_k_m", "cpus": len(os.sched_getaffinity(0)),
              "draft_max": args.draft_max, "calls": args.calls,
              "speedup": {m: round(r["summary"]["tokens_per_s"] / base, 3) for m, r in results.items() if base},
              "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=2))


if __name__ == "__main__":
    main()
