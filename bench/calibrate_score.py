"""Fit the humanize score's calibration on the corpus's calibration split: pipeline/score/calibration/score.json.

    python bench/calibrate_score.py        (after bench/score_corpus.py has cached every passage's features)

Per language: standardise the features (calibration mean and spread), fit a logistic regression
human-vs-machine with both classes weighted equally (L2, Newton's method), and set the pass mark by
one rule: the 10th percentile of the calibration human passages' scores, so 90 % of them pass. A
paragraph gets its own number only from the length (predicted tokens) where, on the calibration
split's paragraphs, every longer bucket tells people from models with AUC >= 0.90
(``min_tokens_paragraph``); shorter ones are ``too_short``. The test split is never read here.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.model.local import assets  # noqa: E402
from pipeline.score import scoring  # noqa: E402

from score_eval import (  # noqa: E402
    by_length,
    cached_features,
    corpus,
    digest,
    paragraph_floor,
    paragraph_scores,
    split_of,
)

L2 = 1.0          # ridge on standardised coefficients: keeps secondary features from fitting noise
HUMAN_PASS = 0.90  # the threshold rule


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression by Newton's method (a few iterations converge)."""
    n, d = x.shape
    w_class = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1)) * n
    xb = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    reg = np.full(d + 1, L2)
    reg[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(xb @ beta, -60, 60)))
        grad = xb.T @ (w_class * (p - y)) + reg * beta
        hess = (xb * (w_class * p * (1 - p))[:, None]).T @ xb + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def main() -> None:
    cache = cached_features()
    out = {"method": scoring.METHOD, "method_version": scoring.METHOD_VERSION, "features": list(scoring.FEATURES),
           "model_file": assets.SCORER.filename, "model_sha256": assets.SCORER.sha256,
           "rule": f"threshold = the {round((1 - HUMAN_PASS) * 100)}th percentile of the calibration split's "
                   f"human passages: {HUMAN_PASS:.0%} of them pass",
           "languages": {}}
    for lang in ("en", "zh"):
        rows = corpus(lang)
        split = split_of(rows)
        cal = [r for r in rows if split[r["id"]] == "cal" and (r["id"], digest(r["text"])) in cache]
        missing = sum(1 for r in rows if split[r["id"]] == "cal" and (r["id"], digest(r["text"])) not in cache)
        if missing:
            print(f"{lang}: {missing} calibration passages have no cached features; run bench/score_corpus.py",
                  file=sys.stderr)
        if not any(r["label"] == "human" for r in cal) or not any(r["label"] == "machine" for r in cal):
            print(f"{lang}: no calibration passages of both kinds scored yet", file=sys.stderr)
            continue
        feats = np.array([[cache[(r["id"], digest(r["text"]))][f] for f in scoring.FEATURES] for r in cal])
        y = np.array([1.0 if r["label"] == "human" else 0.0 for r in cal])
        mean, scale = feats.mean(axis=0), feats.std(axis=0)
        scale[scale == 0] = 1.0
        coef, intercept = fit((feats - mean) / scale, y)
        c = scoring.Calibration(lang, tuple(mean), tuple(scale), tuple(coef), intercept, 0.0)
        human = sorted(100 * c.probability(dict(zip(scoring.FEATURES, f, strict=True))) for f, lab in zip(feats, y, strict=True) if lab == 1)
        k = math.floor((1 - HUMAN_PASS) * len(human))
        threshold = math.floor(human[k] * 10) / 10
        lengths = by_length(paragraph_scores(cal, cache, c.probability), threshold)
        floor = paragraph_floor(lengths)
        out["languages"][lang] = {
            "mean": [round(v, 6) for v in mean], "scale": [round(v, 6) for v in scale],
            "coef": [round(v, 6) for v in coef], "intercept": round(intercept, 6), "threshold": threshold,
            "min_tokens_paragraph": floor,
            "calibration": {"human": int(y.sum()), "machine": int(len(y) - y.sum()),
                            "sources": len({r["source"] for r in cal})},
        }
        for line in lengths:
            print(f"  {lang} paragraphs {line['tokens']:>8} tokens: {line['human']:4} human {line['machine']:4} machine "
                  f"AUC {line['auc']}")
        print(lang, "n_cal", len(cal), "threshold", threshold, "paragraph floor", floor,
              "coef", dict(zip(scoring.FEATURES, np.round(coef, 2), strict=True)))
    target = HERE.parent / "pipeline" / "score" / "calibration" / "score.json"
    target.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print("wrote", target)


if __name__ == "__main__":
    main()
