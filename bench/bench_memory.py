"""Benchmark: peak resident memory of the two local models, each in its own process (issue 22's ≤ 2.5 GB target).

    .venv/bin/python bench/bench_memory.py [--article bench/results/articles/<run>.en.md]

Modes, each a child process reporting ``ru_maxrss`` after its work:

* ``writer-mmap``: the embedded model as llama.cpp loads it by default (weights memory-mapped), answering one
  743-token prompt with 120 tokens;
* ``writer``: the same with the parameters the pipeline ships (``provider.server_params``: weights read);
* ``scorer``: the scoring model (``pipeline.score.scoring``) scoring one article.

A run holds both models (the writer, then the scorer from the humanize step on), plus the Python process
itself with litellm imported, measured as ``base``. Writes bench/results/memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def child(mode: str, article: Path) -> dict:
    text = article.read_text(encoding="utf-8")
    started = time.perf_counter()
    if mode == "base":
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        import litellm  # noqa: F401

        import pipeline.cli  # noqa: F401
        return {"mode": mode, "peak_rss_mb": rss_mb()}
    if mode.startswith("writer"):
        import xllamacpp

        from pipeline.model.local import assets, provider

        p = provider.server_params(assets.model_path(REPO / "var"))
        if mode == "writer-mmap":
            p.load_mode = xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_MMAP
        server = xllamacpp.Server(p)
        prompt = " ".join(text.split()[:600]) + "\n\nSummarise the above in 100 words."
        reply = provider._generate(server, {"messages": [{"role": "user", "content": prompt}], "max_tokens": 120,
                                            "seed": 1, "temperature": 0}, None)
        return {"mode": mode, "peak_rss_mb": rss_mb(), "seconds": round(time.perf_counter() - started, 1),
                "usage": reply.get("usage")}
    from pipeline.score import scoring

    scoring.configure(REPO / "var")
    score = scoring.score(text, "en")
    return {"mode": mode, "peak_rss_mb": rss_mb(), "seconds": round(time.perf_counter() - started, 1),
            "score": score.total}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--article", type=Path, default=None)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    article = args.article or sorted((REPO / "bench/results/articles").glob("*.en.md"))[-1]
    if args.child:
        print(json.dumps(child(args.child, article)))
        return
    results = {}
    for mode in ("base", "writer-mmap", "writer", "scorer"):
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--article", str(article)], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
        results[mode] = json.loads(out)
        print(mode, results[mode], file=sys.stderr, flush=True)
    # One run is one interpreter holding all three; bench/bench_articles.py measures a whole run's peak.
    report = {"article": article.name, "cpus": len(os.sched_getaffinity(0)), "results": results,
              "sum_mb": sum(r["peak_rss_mb"] for r in results.values() if r["mode"] != "writer-mmap"),
              "mmap_saving_mb": results["writer-mmap"]["peak_rss_mb"] - results["writer"]["peak_rss_mb"]}
    (REPO / "bench/results/memory.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=2))


if __name__ == "__main__":
    main()
