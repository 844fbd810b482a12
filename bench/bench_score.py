"""How well the humanize score tells people's writing from models', on the corpus's TEST split.

    python bench/bench_score.py [--json]

Per language and per source: AUC (human vs machine), TPR at 5 % FPR (machine passages flagged when
at most 5 % of human ones are), and the pass rates of human and machine text at the shipped threshold;
the same for the score before issue 21 (pipeline/score/_stylometric.py, at the threshold 50 the shipped config used) on the same passages.
Then each test paragraph scored alone, by length: where a per-paragraph number means something. Features come
from bench/results/score_features.jsonl (bench/score_corpus.py), scored by the shipped calibration.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.score import _stylometric as stylometric  # noqa: E402
from pipeline.score import scoring  # noqa: E402

from score_eval import (  # noqa: E402
    auc,
    by_length,
    cached_features,
    corpus,
    digest,
    paragraph_scores,
    pass_rate,
    split_of,
    tpr_at_fpr,
)


def row(name: str, human: list[float], machine: list[float], threshold: float) -> dict:
    return {"set": name, "human": len(human), "machine": len(machine), "auc": round(auc(human, machine), 3),
            "tpr_at_5fpr": round(tpr_at_fpr(human, machine), 3),
            "human_pass": round(pass_rate(human, threshold), 3), "machine_pass": round(pass_rate(machine, threshold), 3)}


def main() -> None:
    cache = cached_features()
    cals = scoring.calibrations()
    report: dict = {"scorer": scoring.ModelScorer().version, "languages": {}}
    for lang in ("en", "zh"):
        rows = [r for r in corpus(lang) if (r["id"], digest(r["text"])) in cache]
        split = split_of(corpus(lang))
        test = [r for r in rows if split[r["id"]] == "test"]
        cal = cals.languages[lang]
        new = {r["id"]: 100 * cal.probability(cache[(r["id"], digest(r["text"]))]) for r in test}
        old = {r["id"]: stylometric.total(r["text"], lang) for r in test}
        thr = cal.threshold
        human = [r for r in test if r["label"] == "human"]
        machine = [r for r in test if r["label"] == "machine"]
        lines = [row("all", [new[r["id"]] for r in human], [new[r["id"]] for r in machine], thr)]
        lines[0]["old_heuristic"] = row("all", [old[r["id"]] for r in human], [old[r["id"]] for r in machine], 50.0)
        for source in sorted({r["source"] for r in machine}):
            ms = [new[r["id"]] for r in machine if r["source"] == source]
            lines.append(row(f"machine:{source}", [new[r["id"]] for r in human], ms, thr))
        for source in sorted({r["source"] for r in human}):
            hs = [new[r["id"]] for r in human if r["source"] == source]
            lines.append({"set": f"human:{source}", "human": len(hs), "human_pass": round(pass_rate(hs, thr), 3)})
        paragraphs = by_length(paragraph_scores(test, cache, cal.probability), thr)
        report["languages"][lang] = {"threshold": thr, "rows": lines, "paragraph_floor": cal.min_tokens_paragraph,
                                     "paragraphs": paragraphs}
    if "--json" in sys.argv:
        print(json.dumps(report, indent=1, ensure_ascii=False))
        return
    print(report["scorer"])
    for lang, data in report["languages"].items():
        print(f"\n{lang}: threshold {data['threshold']}")
        print(f"{'set':44} {'hum':>4} {'mach':>4} {'AUC':>6} {'TPR@5%':>7} {'h pass':>7} {'m pass':>7}")
        for r in data["rows"]:
            print(f"{r['set'][:44]:44} {r.get('human', ''):>4} {r.get('machine', ''):>4} {r.get('auc', ''):>6} "
                  f"{r.get('tpr_at_5fpr', ''):>7} {r.get('human_pass', ''):>7} {r.get('machine_pass', ''):>7}")
            if "old_heuristic" in r:
                o = r["old_heuristic"]
                print(f"{'  old heuristic (threshold 50)':44} {o['human']:>4} {o['machine']:>4} {o['auc']:>6} "
                      f"{o['tpr_at_5fpr']:>7} {o['human_pass']:>7} {o['machine_pass']:>7}")
        print(f"\n{lang}: each paragraph scored alone, by its length in tokens (shipped floor: "
              f"{data['paragraph_floor']}; shorter ones are too_short)")
        print(f"{'tokens':44} {'hum':>4} {'mach':>4} {'AUC':>6} {'':>7} {'h pass':>7} {'m pass':>7}")
        for r in data["paragraphs"]:
            print(f"{r['tokens']:44} {r['human']:>4} {r['machine']:>4} {r['auc']:>6} {'':>7} {r['human_pass']:>7} "
                  f"{r['machine_pass']:>7}")


if __name__ == "__main__":
    main()
