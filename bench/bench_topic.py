"""The topic step must not slow down as a channel's history grows (issue 14, item 9).

    .venv/bin/python bench/bench_topic.py [--publications 10000] [--backlog 5000] [--repeat 20]

Builds a ledger with N verified publications (each with its topic) and a
backlog of M lines, then times ``topic`` (the capability, end to end: ledger
query, backlog parse, repeat check, the new Topic row) in a fresh run each time.
Three backlogs:

* ``consumed``: the first M-1 lines were published (exact repeats) and the last
  is new: a channel that has worked through its backlog in order, the usual case;
* ``near``: as ``consumed``, but the 20 lines before the new one are near-repeats
  (a word changed) of published titles, so each needs the fuzzy check;
* ``fresh``: nothing in the backlog was published: the first line is picked.

Also times the old all-pairs check on a 800-line backlog with 105 publications, the
issue's measurement, for comparison. Writes bench/results/topic.json; fails if the
``consumed`` median exceeds 50 ms.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline import config as config_mod  # noqa: E402
from pipeline.capabilities.topic import topic  # noqa: E402
from pipeline.ledger.models import Article, Publication, Run, Topic  # noqa: E402
from pipeline.ledger.writer import Ledger  # noqa: E402
from pipeline.text.content import normalize_title  # noqa: E402
from pipeline.tools.prompts import Prompts  # noqa: E402
from pipeline.tools.toolbox import RunContext  # noqa: E402

WORDS = ("cache build test deploy rollback schema index query latency queue retry lock shard replica log trace "
         "metric alert budget review incident runbook feature flag canary release branch merge lint profile "
         "memory leak thread pool socket timeout backoff quota tenant migration").split()


def title(rng: random.Random, i: int) -> str:
    return f"{' '.join(rng.sample(WORDS, 5)).capitalize()} part {i}"


def build(directory: Path, publications: int, rng: random.Random) -> tuple[Ledger, list[str]]:
    ledger = Ledger(f"sqlite:///{directory}/ledger.db")
    titles = [title(rng, i) for i in range(publications)]
    with ledger.write() as s:  # parents first: foreign keys are enforced
        s.add_all(Run(id=f"r-bench-{i:06d}", model="bench", status="done") for i in range(publications))
    with ledger.write() as s:
        s.add_all(Article(id=i + 1, run_id=f"r-bench-{i:06d}", kind="humanized", title=t, body="b", language="en",
                          content_hash="0" * 64, score=80) for i, t in enumerate(titles))
    with ledger.write() as s:
        for i, t in enumerate(titles):
            run_id = f"r-bench-{i:06d}"
            s.add(Topic(run_id=run_id, title=t, normalized=normalize_title(t), source="backlog"))
            s.add(Publication(run_id=run_id, article_id=i + 1, idempotency_key=f"{i:064x}", target="local",
                              content_hash="0" * 64, status="verified", url=f"http://127.0.0.1/posts/{i}.html"))
    return ledger, titles


def time_topic(directory: Path, ledger: Ledger, lines: list[str], repeat: int) -> tuple[list[float], list[float], str]:
    (directory / "backlog.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"PIPELINE_LEDGER__URL": ledger.url, "PIPELINE_TOPIC__BACKLOG": str(directory / "backlog.txt"),
           "PIPELINE_LLM__API_KEY_ENV": ""}
    cfg = config_mod.load(None, environ=env)
    cfg.base_dir = directory
    times, cpu, picked = [], [], ""
    for _ in range(repeat):
        run = ledger.start_run("bench")
        ctx = RunContext(run.id, cfg.run_settings(), ledger, None, Prompts())
        start, start_cpu = time.perf_counter(), time.process_time()
        result = topic.fn(ctx)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        picked = result["title"]
    return times, cpu, picked


def old_check(backlog_titles: list[str], published: list[str], threshold: float = 0.85) -> float:
    start = time.perf_counter()
    [t for t in backlog_titles
     if not any(difflib.SequenceMatcher(None, normalize_title(t), p).ratio() >= threshold for p in published)]
    return (time.perf_counter() - start) * 1000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--publications", type=int, default=10_000)
    ap.add_argument("--backlog", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(14)
    results: dict[str, object] = {"publications": args.publications, "backlog_lines": args.backlog, "runs": args.repeat}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ledger, titles = build(directory, args.publications, rng)
        new = "A title nobody has used yet about reading flame graphs"
        consumed = [*titles[: args.backlog - 1], new]
        near = [*titles[: args.backlog - 21], *(t.replace("part", "chapter") for t in titles[args.backlog: args.backlog + 20]), new]
        fresh = [f"Unpublished idea {i} about {' and '.join(rng.sample(WORDS, 2))}" for i in range(args.backlog)]
        for name, lines in (("consumed", consumed), ("near", near), ("fresh", fresh)):
            times, cpu, picked = time_topic(directory, ledger, lines, args.repeat)
            results[name] = {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
                             "cpu_median_ms": round(statistics.median(cpu), 1), "picked": picked}
            print(f"{name:<9} wall median {statistics.median(times):6.1f} ms  max {max(times):6.1f} ms  "
                  f"cpu median {statistics.median(cpu):6.1f} ms  picked {picked!r}")
        pub105 = [normalize_title(t) for t in titles[:105]]
        old = old_check([f"Backlog line {i} {' '.join(rng.sample(WORDS, 4))}" for i in range(800)], pub105)
        results["old_all_pairs_800x105_ms"] = round(old, 1)
        print(f"old all-pairs check, 800 lines x 105 publications: {old:.0f} ms")
        ledger.close()
    results["cpu"] = os.cpu_count()
    # The machine is shared: the load average says how far wall time is from CPU time.
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    out = REPO / "bench" / "results" / "topic.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    ok = results["consumed"]["cpu_median_ms"] <= 50  # type: ignore[index]
    print("PASS" if ok else "FAIL", f"(consumed CPU median ≤ 50 ms; load average {results['load_average_1m']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
