"""Speed and memory of the humanize score: an 800-word article on 2 cores, the model loaded.

    python bench/bench_score_speed.py [--repeat 3]

Targets (issue 21): <= 15 s per 800-word article with the model loaded, <= 1.5 GB extra resident
memory, the model loaded once per process. The article is eight human passages of the corpus's test
split joined as paragraphs (~800 words); each repeat scores it from nothing (the paragraph cache is
cleared). Writes bench/results/score_speed.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from score_eval import corpus

    paras: list[str] = []
    for row in corpus("en"):
        if row["label"] == "human":
            paras += [p for p in row["text"].split("\n\n") if p.strip()]
        if sum(len(p.split()) for p in paras) >= 800:
            break
    article = "# An article\n\n" + "\n\n".join(paras)
    words = len(article.split())
    from pipeline.score import scoring

    before = rss_mb()
    scorer = scoring.ModelScorer(HERE.parent / "var")
    started = time.perf_counter()
    scorer.model()
    load_s = time.perf_counter() - started
    times = []
    for _ in range(args.repeat):
        scorer._cache.clear()
        started = time.perf_counter()
        result = scorer.score(article, "en")
        times.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tokens = sum(p.tokens for p in result.paragraphs)
    out = {"words": words, "tokens": tokens, "paragraphs": len(result.paragraphs), "load_s": round(load_s, 2),
           "score_s_median": round(statistics.median(times), 2), "score_s_all": [round(t, 2) for t in times],
           "tokens_per_s": round(tokens / statistics.median(times), 1), "rss_before_mb": round(before),
           "peak_rss_mb": round(peak), "extra_rss_mb": round(peak - before), "total": result.total}
    (HERE / "results" / "score_speed.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
