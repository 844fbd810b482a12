"""The grounding check measured on labelled sentences (issue 48): does it flag what no source backs, and only that?

Each line of ``bench/corpus/grounding/*.jsonl`` is a sentence with the source it claims to come from and a label:
supported, unsupported, first person, copied (the labels' rules: bench/corpus/grounding/README.md). The check
is run on each sentence against its source alone; the positive class is "fails" (any label but supported).

Splits, by file: ``dev.jsonl`` (written with the check, the cases it was built for: tuned on); ``tune.jsonl`` and
``heldout_final.jsonl``, written by another session from the rules alone, without the check's code, on 14 sources
of its own, split by source (7 and 7, both languages in each): the check was corrected on what it missed in
``tune`` and never on ``heldout_final``, whose misses are counted, not listed. Reported per split, language and
case; results in bench/results/grounding.json.

    .venv/bin/python bench/bench_grounding.py
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))

from pipeline.sources import grounding  # noqa: E402
from pipeline.states import Grounded  # noqa: E402


def verdict(item: dict) -> str:
    idx = grounding.Index([grounding.SourceText(1, item["kind"], item["source_id"], item["source"])], item["language"])
    rows = grounding.check("", item["sentence"], idx).statements[1:]
    failing = [r for r in rows if Grounded(r.status).failing]
    return str(failing[0].status) if failing else "supported"


def scores(pairs: list[tuple[str, str]]) -> dict:
    tp = sum(1 for g, p in pairs if g != "supported" and p != "supported")
    fp = sum(1 for g, p in pairs if g == "supported" and p != "supported")
    fn = sum(1 for g, p in pairs if g != "supported" and p == "supported")
    exact = sum(1 for g, p in pairs if g == p)
    return {"n": len(pairs), "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None, "tp": tp, "fp": fp, "fn": fn,
            "label_accuracy": round(exact / len(pairs), 3) if pairs else None}


def main() -> None:
    results: dict = {}
    misses: dict[str, list] = {}
    for path in sorted((ROOT / "corpus" / "grounding").glob("*.jsonl")):
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pairs = [(i["label"], verdict(i)) for i in items]
        split = path.stem
        by: dict[str, dict[str, list]] = {"language": defaultdict(list), "case": defaultdict(list),
                                          "source": defaultdict(list)}
        for item, pair in zip(items, pairs, strict=True):
            by["language"][item["language"]].append(pair)
            by["case"][item.get("case", "")].append(pair)
            by["source"][item["source_id"]].append(pair)
        results[split] = {"all": scores(pairs), **{k: {g: scores(v) for g, v in sorted(d.items())} for k, d in by.items()}}
        misses[split] = [] if split == "heldout_final" else [{"id": i["id"], "case": i.get("case"), "label": g, "check": p, "sentence": i["sentence"]}
                         for i, (g, p) in zip(items, pairs, strict=True) if (g == "supported") != (p == "supported")]
    out = {"results": results, "misses": misses}
    (ROOT / "results" / "grounding.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for split, r in results.items():
        a = r["all"]
        print(f"{split:8} n={a['n']:4} precision {a['precision']} recall {a['recall']} (tp {a['tp']} fp {a['fp']} "
              f"fn {a['fn']}); label accuracy {a['label_accuracy']}")
        for lang, s in r["language"].items():
            print(f"  {lang}: n={s['n']} precision {s['precision']} recall {s['recall']}")


if __name__ == "__main__":
    main()
