"""Benchmark: the claim rules against the labelled corpus (bench/corpus/claims.txt).

    .venv/bin/python bench/bench_claims.py [--show] [--show-heldout] [--json] [--corpus FILE]

For every message the labels say which claims it asserts (with quoted values)
and the facts profile says what the ledger holds; the expected verdicts follow
from those. The rules (``pipeline.tools.claims``, no model) produce their own
verdicts. Two measures, per class and per split (dev / held-out), both over
(capability, verdict) pairs per message:

* **false claims**: pairs whose verdict is ``unbacked`` or ``mismatch`` — the
  hallucination set the guard exists to find (a false alarm is a false positive
  here; a missed invention a false negative);
* **all claims**: every pair, ``verified`` included (extraction quality).

A class without any expected or predicted pair has nothing to measure and
shows 1.00 with its counts (for negations, questions and plans the counts are
the point: zero false positives). Held-out records (number a multiple of 3)
are never printed unless asked: the rules are tuned on the dev split only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.tools.catalog import lexicons  # noqa: E402
from pipeline.tools.claims import VERIFIED, ClaimFound, ClaimRules  # noqa: E402

CORPUS = REPO / "bench" / "corpus" / "claims.txt"
URL = "http://127.0.0.1:8765/posts/sqlite-wal.html"
TOPIC = "Why SQLite WAL mode matters"

_chain = [("topic", TOPIC), ("draft", 12), ("humanize", 78.4), ("publish", URL), ("register", "CT-20261130-003"), ("report", 5)]
PROFILES: dict[str, dict[str, list]] = {"none": {}}
for i, (cap, _value) in enumerate(_chain):
    PROFILES[{"topic": "topic", "draft": "draft", "humanize": "humanized", "publish": "published",
              "register": "registered", "report": "all"}[cap]] = {c: [v] for c, v in _chain[:i + 1]}
PROFILES["lowscore"] = {"topic": [TOPIC], "draft": [12], "humanize": [41.6]}

# The shipped config's hosts: what the guard sees in production.
RULES = ClaimRules(lexicons(), registration_prefix="CT", publish_hosts=["127.0.0.1", "localhost"])


@dataclass
class Record:
    id: str
    cls: str
    lang: str
    number: int
    facts: dict[str, list]
    labels: list[tuple[str, str | None]]
    text: str

    @property
    def split(self) -> str:
        return "heldout" if self.number % 3 == 0 else "dev"


def load(path: Path = CORPUS) -> list[Record]:
    records: list[Record] = []
    head, lines = None, []

    def close() -> None:
        if head is None:
            return
        rid, profile, *labels = head.split()
        cls, lang, number = re.fullmatch(r"([a-z]+)-(zh|en)-(\d+)", rid).groups()
        parsed = [(lab.split("=", 1)[0], lab.split("=", 1)[1] if "=" in lab else None) for lab in labels]
        records.append(Record(rid, cls, lang, int(number), PROFILES[profile], parsed, "\n".join(lines).strip()))

    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("=== "):
            close()
            head, lines = line[4:], []
        elif head is not None:
            lines.append(line)
        # lines before the first record (comments) are skipped
    close()
    return records


def expected(rec: Record, rules: ClaimRules = RULES) -> set[tuple[str, str]]:
    return {(c.capability, c.status) for c in rules.judge([ClaimFound(cap, "", value) for cap, value in rec.labels], rec.facts)}


def predicted(rec: Record, rules: ClaimRules = RULES) -> set[tuple[str, str]]:
    return {(c.capability, c.status) for c in rules.check(rec.text, rec.facts)}


class Tally:
    def __init__(self) -> None:
        self.tp = self.fp = self.fn = 0

    def add(self, exp: set, pred: set) -> None:
        self.tp += len(exp & pred)
        self.fp += len(pred - exp)
        self.fn += len(exp - pred)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def as_dict(self) -> dict:
        return {"precision": round(self.precision, 3), "recall": round(self.recall, 3), "tp": self.tp, "fp": self.fp, "fn": self.fn}


def evaluate(records: list[Record], rules: ClaimRules = RULES) -> dict:
    """{split: {class or "overall": {"false": Tally, "all": Tally, "n": int}}} plus the failing records."""
    table: dict[str, dict[str, dict]] = defaultdict(lambda: defaultdict(lambda: {"false": Tally(), "all": Tally(), "n": 0}))
    failures = []
    for rec in records:
        exp, pred = expected(rec, rules), predicted(rec, rules)
        for split in (rec.split, "all"):
            for cls in (rec.cls, "overall"):
                row = table[split][cls]
                row["n"] += 1
                row["all"].add(exp, pred)
                row["false"].add({p for p in exp if p[1] != VERIFIED}, {p for p in pred if p[1] != VERIFIED})
        if exp != pred:
            failures.append((rec, exp, pred))
    return {"table": table, "failures": failures}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--show", action="store_true", help="print the dev records the rules get wrong")
    ap.add_argument("--show-heldout", action="store_true", help="also print held-out failures (do not tune on them)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--corpus", type=Path, default=CORPUS,
                    help="bench/corpus/claims_fresh.txt: 61 messages written after the rules, never tuned on")
    args = ap.parse_args()
    records = load(args.corpus)
    started = time.perf_counter()
    result = evaluate(records)
    elapsed = time.perf_counter() - started
    table = result["table"]
    if args.json:
        print(json.dumps({split: {cls: {"n": row["n"], "false_claims": row["false"].as_dict(), "all_claims": row["all"].as_dict()}
                                  for cls, row in rows.items()} for split, rows in table.items()}, indent=2))
        return 0
    print(f"{len(records)} messages ({sum(r.split == 'dev' for r in records)} dev, "
          f"{sum(r.split == 'heldout' for r in records)} held-out), {1000 * elapsed / len(records):.2f} ms per message")
    for split in ("dev", "heldout", "all"):
        rows = table[split]
        print(f"\n[{split}]  {'class':<11}{'n':>4}   false claims: P     R    (tp/fp/fn)    all claims: P     R    (tp/fp/fn)")
        for cls in [*sorted(c for c in rows if c != "overall"), "overall"]:
            row = rows[cls]
            f, a = row["false"], row["all"]
            print(f"         {cls:<11}{row['n']:>4}                 {f.precision:.3f} {f.recall:.3f} ({f.tp}/{f.fp}/{f.fn})"
                  f"{'':<8}{a.precision:.3f} {a.recall:.3f} ({a.tp}/{a.fp}/{a.fn})")
    if args.show or args.show_heldout:
        for rec, exp, pred in result["failures"]:
            if rec.split == "heldout" and not args.show_heldout:
                continue
            print(f"\n{rec.id} [{rec.split}]\n  text: {rec.text!r}\n  missed: {sorted(exp - pred)}\n  extra:  {sorted(pred - exp)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
