"""Token-probability features of every passage of the score corpus, cached for calibration and evaluation.

    python bench/score_corpus.py [--limit N]

Reads bench/corpus/score/{human,machine}_{en,zh}.jsonl, scores each passage paragraph by paragraph
exactly as the pipeline's scorer does (``pipeline.score.scoring.ModelScorer``: one sequence per paragraph,
pooled), and appends {"id", "sha", "n", features..., "paragraphs": [{"n", features...}, ...]} to
bench/results/score_features.jsonl: the passage's pooled features, and each paragraph's own (what
``pipeline score`` shows per paragraph, measured by bench_score.py by paragraph length). Resumable:
passages already there (same text digest) are skipped; ``--paragraphs`` re-scores those cached
before paragraph features were kept (a later line wins). The model loads once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.score import scoring  # noqa: E402

CORPUS = HERE / "corpus" / "score"
OUT = HERE / "results" / "score_features.jsonl"


def passages() -> list[dict]:
    rows = []
    for name in ("human_en", "human_zh", "machine_en", "machine_zh"):
        path = CORPUS / f"{name}.jsonl"
        if path.exists():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("text")]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def features(model, row: dict) -> dict:
    # The scorer's own path (paragraphs_of, one sequence per paragraph, pool_paragraph), minus the
    # calibration that this script's output is for.
    total = scoring.Pooled()
    paragraphs = []
    texts = scoring.paragraphs_of(row["text"])
    for para, stats in zip(texts, model.stats_many(texts), strict=True):  # one pass, as an article's paragraphs are
        pooled = scoring.pool_paragraph(para, stats, row["lang"])
        paragraphs.append({"n": pooled.n, **pooled.features()})
        total.add(pooled)
    return {"id": row["id"], "sha": digest(row["text"]), "n": total.n, **total.features(), "paragraphs": paragraphs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--per-source", type=int, default=0, help="score at most this many human passages per source")
    ap.add_argument("--data-dir", default=str(HERE.parent / "var"))
    ap.add_argument("--paragraphs", action="store_true", help="re-score passages cached without paragraph features")
    args = ap.parse_args()
    done = set()
    if OUT.exists():
        done = {(r["id"], r["sha"]) for r in map(json.loads, OUT.read_text().splitlines())
                if "paragraphs" in r or not args.paragraphs}
    rows = passages()
    if args.per_source:  # a subsample, every source represented: machine passages first, then humans round-robin
        seen: dict[str, int] = {}
        kept = []
        for r in rows:
            if r["label"] == "human":
                seen[r["source"]] = seen.get(r["source"], 0) + 1
                if seen[r["source"]] > args.per_source:
                    continue
            kept.append(r)
        rows = sorted(kept, key=lambda r: (r["label"] != "machine", seen.get(r["source"], 0) and 0))
    todo = [r for r in rows if (r["id"], digest(r["text"])) not in done]
    if args.limit:
        todo = todo[:args.limit]
    from pipeline.model.local import assets, logprobs

    model = logprobs.scoring_model(assets.model_path(Path(args.data_dir), assets.SCORER), assets.SCORER.sha256)
    started = time.monotonic()
    with OUT.open("a") as fh:
        for i, row in enumerate(todo, 1):
            fh.write(json.dumps(features(model, row)) + "\n")
            fh.flush()
            if i % 20 == 0:
                print(f"{i}/{len(todo)} {time.monotonic() - started:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
