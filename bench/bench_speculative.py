"""Benchmark: speculative decoding on the embedded model, with the 0.5B Qwen2.5-Coder as the draft model.

    nice -n 5 .venv/bin/python bench/bench_speculative.py [--draft /tmp/sns/q05.gguf] [--prompts 3] [--tokens 300]

Each mode runs in its own process (one model server at a time: the machine has 2 cores and little
memory to spare), with the parameters ``pipeline.model.local.provider.server_params`` gives the pipeline:
``off`` is the server as shipped, ``on`` the same plus ``COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE`` with
the draft model. Both generate the same ~300-token article prose (same prompts, seeds and the draft
step's temperature, ``[llm] temperature``) after one short warm-up call. Reported per mode: tokens/s
(llama.cpp's own ``predicted_per_second``, and completion tokens / wall), and for ``on`` the draft
acceptance rate (``draft_n_accepted / draft_n`` from the reply's timings).
Writes bench/results/speculative.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DRAFT = Path("/tmp/sns/q05.gguf")
TOPICS = [
    "Why our nightly builds got faster",
    "What we learned moving our job queue from cron to a scheduler",
    "How we cut the cost of our test database by half",
    "A year of running PostgreSQL on small machines",
]
SYSTEM = ("You write articles for software engineers: concrete, plain English, no lists, no headings. "
          "Write flowing paragraphs of prose.")


def _stream(server, req: dict) -> dict:
    """A streamed completion, as the provider decodes prose (``pipeline.model.local.provider._generate``), keeping timings."""
    text: list[str] = []
    last: dict = {}

    def on_chunk(chunk: dict) -> bool:
        for choice in chunk.get("choices") or []:
            if piece := (choice.get("delta") or {}).get("content"):
                text.append(piece)
        for key in ("usage", "timings"):
            if chunk.get(key):
                last[key] = chunk[key]
        if chunk.get("error"):
            last["error"] = chunk["error"]
        return False

    server.handle_chat_completions({**req, "stream": True, "stream_options": {"include_usage": True}}, on_chunk)
    if "error" in last:
        raise RuntimeError(f"llama.cpp: {last['error']}")
    return {"choices": [{"message": {"content": "".join(text)}}], **last}


def child(mode: str, draft: Path, prompts: int, tokens: int, temperature: float) -> dict:
    import xllamacpp

    from pipeline.model.local import assets
    from pipeline.model.local.provider import server_params

    path = assets.model_path(REPO / "var")
    started = time.perf_counter()
    server = xllamacpp.Server(server_params(path, draft=draft if mode == "on" else None))
    load_s = time.perf_counter() - started
    print(f"{mode}: loaded in {load_s:.1f} s", file=sys.stderr, flush=True)
    out = []
    for i, topic in enumerate(["warm-up: " + TOPICS[-1], *TOPICS[:prompts]]):
        req = {"messages": [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"Write the opening of an article titled \"{topic}\"."}],
               "max_tokens": 16 if i == 0 else tokens, "temperature": temperature, "seed": 1000 + i}
        t0 = time.perf_counter()
        resp = _stream(server, req)
        wall = time.perf_counter() - t0
        print(f"{mode}: generation {i} in {wall:.1f} s", file=sys.stderr, flush=True)
        if i == 0:
            continue
        timings = resp.get("timings") or {}
        usage = resp.get("usage") or {}
        n = usage.get("completion_tokens") or timings.get("predicted_n") or 0
        out.append({"topic": topic, "completion_tokens": n, "wall_s": round(wall, 2),
                    "tokens_per_s_wall": round(n / wall, 2) if wall else None,
                    "predicted_per_second": round(timings.get("predicted_per_second") or 0, 2),
                    "draft_n": timings.get("draft_n"), "draft_n_accepted": timings.get("draft_n_accepted"),
                    "text_head": (resp["choices"][0]["message"].get("content") or "")[:120]})
    return {"mode": mode, "load_s": round(load_s, 1), "generations": out}


def summarise(res: dict) -> dict:
    gens = res["generations"]
    total_n = sum(g["completion_tokens"] for g in gens)
    total_wall = sum(g["wall_s"] for g in gens)
    summary = {"completion_tokens": total_n, "wall_s": round(total_wall, 1),
               "tokens_per_s": round(total_n / total_wall, 2) if total_wall else None,
               "predicted_per_second_median": statistics.median(g["predicted_per_second"] for g in gens)}
    drafted = sum(g["draft_n"] or 0 for g in gens)
    if drafted:
        summary["acceptance_rate"] = round(sum(g["draft_n_accepted"] or 0 for g in gens) / drafted, 3)
        summary["draft_tokens"] = drafted
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draft", type=Path, default=DRAFT)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=None, help="default: [llm] temperature of config.toml")
    ap.add_argument("--child", choices=("off", "on"))
    args = ap.parse_args()
    if args.temperature is None:
        from pipeline import config as config_mod

        args.temperature = config_mod.load(REPO / "config.toml").llm.temperature
    if args.child:
        sys.stdout.write(json.dumps(child(args.child, args.draft, args.prompts, args.tokens, args.temperature)) + "\n")
        return
    if not args.draft.exists():
        sys.exit(f"error: no draft model at {args.draft}")
    results = {}
    for mode in ("off", "on"):
        proc = subprocess.run([sys.executable, __file__, "--child", mode, "--draft", str(args.draft), "--prompts",
                               str(args.prompts), "--tokens", str(args.tokens), "--temperature", str(args.temperature)],
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            sys.exit(f"error: mode {mode} failed: {proc.stderr[-2000:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        res["summary"] = summarise(res)
        results[mode] = res
        print(mode, json.dumps(res["summary"]), file=sys.stderr)
    off, on = results["off"]["summary"], results["on"]["summary"]
    report = {"model": "qwen2.5-coder-1.5b-instruct-q4_k_m", "draft_model": args.draft.name,
              "cpus": len(os.sched_getaffinity(0)), "tokens": args.tokens, "temperature": args.temperature,
              "speedup": round(on["tokens_per_s"] / off["tokens_per_s"], 3) if off["tokens_per_s"] else None,
              "results": results}
    (REPO / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (REPO / "bench" / "results" / "speculative.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=2))


if __name__ == "__main__":
    main()
