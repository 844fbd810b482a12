"""Shared by calibrate_score.py and bench_score.py: the corpus, its split by source, and the measures."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus" / "score"
FEATURES_CACHE = HERE / "results" / "score_features.jsonl"


def corpus(lang: str) -> list[dict]:
    rows = []
    for kind in ("human", "machine"):
        path = CORPUS / f"{kind}_{lang}.jsonl"
        if path.exists():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("text")]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def split_of(rows: list[dict]) -> dict[str, str]:
    """id -> "cal" | "test", by source, never by passage.

    Human sources go, largest first, to whichever split holds fewer human passages so far (ties by
    name), so both halves have many authors. Machine passages split by topic group (A: calibration,
    B: test): the test split's topics were never seen in calibration, in any register or model.
    """
    split: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for r in rows:
        if r["label"] == "human":
            sizes[r["source"]] = sizes.get(r["source"], 0) + 1
    load = {"cal": 0, "test": 0}
    side_of: dict[str, str] = {}
    for source, n in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        side = "cal" if load["cal"] <= load["test"] else "test"
        side_of[source] = side
        load[side] += n
    for r in rows:
        if r["label"] == "human":
            split[r["id"]] = side_of[r["source"]]
        else:
            split[r["id"]] = "cal" if r.get("topic_group", "A") == "A" else "test"
    return split


def cached_features() -> dict[tuple[str, str], dict]:
    if not FEATURES_CACHE.exists():
        return {}
    return {(r["id"], r["sha"]): r for r in map(json.loads, FEATURES_CACHE.read_text().splitlines())}


def auc(human: list[float], machine: list[float]) -> float:
    """P(a human passage scores above a machine one), ties counting half (Mann-Whitney)."""
    if not human or not machine:
        return float("nan")
    wins = 0.0
    for h in human:
        for m in machine:
            wins += 1.0 if h > m else 0.5 if h == m else 0.0
    return wins / (len(human) * len(machine))


def tpr_at_fpr(human: list[float], machine: list[float], fpr: float = 0.05) -> float:
    """Share of machine passages flagged when at most ``fpr`` of human passages are (flag: score < t)."""
    hs = sorted(human)
    k = math.floor(fpr * len(hs))  # at most k humans strictly below t
    t = hs[k] if k < len(hs) else float("inf")
    return sum(1 for m in machine if m < t) / len(machine) if machine else float("nan")


def pass_rate(scores: list[float], threshold: float) -> float:
    return sum(1 for s in scores if s >= threshold) / len(scores) if scores else float("nan")


# Paragraph lengths (predicted tokens) at which per-paragraph scores are measured, and the bar a
# length must clear before a paragraph of it gets a number (calibrate_score.py sets the floor by it).
PARAGRAPH_EDGES = (20, 30, 40, 60, 80, 100, 150)
PARAGRAPH_AUC = 0.90


def paragraph_scores(rows: list[dict], cache: dict, probability) -> list[tuple[str, int, float]]:
    """(label, tokens, score) of every paragraph of ``rows`` whose features were cached per paragraph."""
    out = []
    for r in rows:
        cached = cache.get((r["id"], digest(r["text"])), {})
        for para in cached.get("paragraphs", []):
            out.append((r["label"], para["n"], 100 * probability(para)))
    return out


def by_length(scored: list[tuple[str, int, float]], threshold: float) -> list[dict]:
    """Per paragraph-length bucket: how many of each kind, AUC, and the pass rates at ``threshold``."""
    lines = []
    for lo, hi in zip(PARAGRAPH_EDGES, (*PARAGRAPH_EDGES[1:], 10**9), strict=True):
        human = [s for lab, n, s in scored if lab == "human" and lo <= n < hi]
        machine = [s for lab, n, s in scored if lab == "machine" and lo <= n < hi]
        lines.append({"tokens": f"{lo}-{hi - 1}" if hi < 10**9 else f"{lo}+", "lo": lo, "human": len(human),
                      "machine": len(machine), "auc": round(auc(human, machine), 3),
                      "human_pass": round(pass_rate(human, threshold), 3),
                      "machine_pass": round(pass_rate(machine, threshold), 3)})
    return lines


def paragraph_floor(lines: list[dict], minimum: int = 5) -> int:
    """The shortest length from which every bucket has AUC >= PARAGRAPH_AUC.

    Walks down from the longest paragraphs; stops at the first bucket that fails the bar, or that holds
    fewer than ``minimum`` of either kind below a measured one (an unmeasured length proves nothing).
    """
    floor, seen = PARAGRAPH_EDGES[-1], False
    for line in reversed(lines):
        measured = line["human"] >= minimum and line["machine"] >= minimum
        if (measured and not line["auc"] >= PARAGRAPH_AUC) or (not measured and seen):
            break
        seen = seen or measured
        floor = line["lo"]
    return floor
