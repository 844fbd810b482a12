"""Benchmark: the humanize step alone, on articles the embedded model wrote (issue 22's "rewrites raise the score").

    .venv/bin/python bench/bench_rewrites.py [--language zh] [--articles 6] [--out bench/results/rewrites.json]

A whole run takes ~3 minutes, most of it the draft; the rewrites are what a prompt change moves. This takes the
bodies of earlier benches' articles (``bench/results/articles/*.{en,zh}.md``, the newest first, one per title), sets
each down as a run's draft in a fresh ledger, and runs the real ``humanize`` capability on the shipped config's
embedded model and scorer: the same ranking, prompts, checks and retries as ``pipeline run``. Reported: the
paragraphs rewritten, the share whose score rose, the model calls, and every rejected attempt's reason counted by
kind, so that a change to a prompt is measured on the same paragraphs before and after.

The articles were rewritten once already when they were benched (their weakest paragraphs are not the draft's), so
the figures are for comparing changes to the rewrite, not a substitute for bench_articles.py's ten fresh runs.
The sampling is seeded, so two versions of the code meet the same paragraphs with the same seeds.

Results (2026-12-06; seven Chinese and eight English articles, 28 and 32 paragraphs):
``bench/results/rewrites-{zh,en}-b2a3c80.json`` before (rose 18/28 and 28/32), ``rewrites-{zh,en}.json`` after a
Chinese term's English is put back, the Chinese retry line moved before the paragraph and echoes of it cut, and a
colon-ended paragraph's rewrite allowed its colon (23/28 and 28/32); tried and dropped:
``rewrites-en-retry-before.json``, the retry line before the paragraph in English too (24/32), and
``rewrites-zh-lengthen.json``, a short rewrite lengthened in a turn after it, told the sentences it left out (18/28).

2026-12-07, on the newest seven Chinese articles (those of the ten fresh runs of 0672428 among them):
``rewrites-zh-f33b019.json`` as shipped, rose 21/28 (16 of the 33 rejected tries "shorter"). Tried and dropped:
``rewrites-zh-sentences.json``, a too-short rewrite retried sentence for sentence (one JSON string per sentence of
the paragraph, schema-constrained): 20/28, the model wrote English words into the Chinese ('构建 result',
'maintenance') and copied sentences whole; ``rewrites-zh-four-tries.json``, ``max_rewrites = 3``: 21/28 on 14 more
tries (two paragraphs rose at the fourth, two others lost theirs to the seeds moving on); "this is not a summary:
every sentence of the paragraph has its own in the rewrite" in the Chinese rewrite prompt: 13 of the first 20
paragraphs against 16 (``rewrites-zh-not-a-summary.txt``, stopped there). Kept: a name with a number in it misspaced
('`Ctrl + Shift + F 10`') is written as its paragraph has it (``humanize.respelt``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

def kind_of(reason: str) -> str:
    """A rejection reason's kind: the key of ``humanize.REJECTED`` or ``draft.PART_PROBLEMS`` whose text, up to its
    first placeholder, it starts with (the reasons are those texts filled in)."""
    from pipeline.capabilities.draft import PART_PROBLEMS
    from pipeline.capabilities.humanize import REJECTED

    reason = reason.strip()
    for texts in (REJECTED, PART_PROBLEMS):
        for own in texts.values():
            for kind, text in own.items():
                if reason.startswith(text.split("$")[0].rstrip()):
                    return kind
    return "other: " + reason[:40]


def articles(language: str, count: int) -> list[tuple[str, str, str]]:
    seen, found = set(), []
    for path in sorted((REPO / "bench/results/articles").glob(f"*.{language}.md"), reverse=True):
        head, _, body = path.read_text(encoding="utf-8").partition("\n\n")
        title = head.lstrip("# ").strip()
        if title not in seen:
            seen.add(title)
            found.append((path.name, title, body.strip()))
    return found[:count]


def rewrite(name: str, title: str, body: str, language: str, state_dir: Path) -> dict:
    from pipeline import config
    from pipeline.capabilities.humanize import humanize
    from pipeline.errors import PipelineError
    from pipeline.ledger.models import Article, Topic
    from pipeline.ledger.writer import Ledger
    from pipeline.model.llm import ChatModel
    from pipeline.score import scoring
    from pipeline.text.content import content_hash
    from pipeline.tools.prompts import Prompts
    from pipeline.tools.toolbox import RunContext

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config.load(REPO / "config.toml", environ={
            "PIPELINE_LEDGER__URL": f"sqlite:///{tmp}/ledger.db", "PIPELINE_DRAFT__LANGUAGE": language,
            "PIPELINE_PUBLISH__PREVIEW_DIR": f"{tmp}/preview", "PIPELINE_DAEMON__STATE_DIR": str(state_dir)})
        ledger = Ledger(cfg.ledger_url)
        scoring.configure(cfg.state_dir, None)
        llm = ChatModel(cfg.llm, data_dir=cfg.state_dir)
        run = ledger.start_run(model=cfg.llm.model)
        ctx = RunContext(run.id, cfg.run_settings(), ledger, llm, Prompts())
        with ledger.write() as s:
            topic = Topic(run_id=run.id, title=title, normalized=title.lower(), source="backlog")
            s.add(topic)
            s.flush()
            draft = Article(run_id=run.id, topic_id=topic.id, kind="draft", title=title, body=body, language=language,
                            content_hash=content_hash(title, body))
            s.add(draft)
        started = time.monotonic()
        try:
            humanize.fn(ctx, draft.id)
        except PipelineError:
            pass  # held below the threshold: the paragraphs are stored all the same
        wall = time.monotonic() - started
        from sqlmodel import select
        with ledger.read() as s:
            done = s.exec(select(Article).where(Article.kind == "humanized")).first()
        calls = ledger.model_calls(run.id)
        record = json.loads(done.paragraphs_json) if done and done.paragraphs_json else {"paragraphs": []}
        return {"article": name, "title": title, "wall_s": round(wall, 1), "model_calls": len(calls),
                "before": record.get("before"), "after": record.get("after"), "paragraphs": record["paragraphs"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--language", default="zh", choices=("en", "zh"))
    ap.add_argument("--articles", type=int, default=6)
    ap.add_argument("--state-dir", default=str(REPO / "var"), help="where the shipped config keeps its models")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    results, reasons = [], collections.Counter()
    for name, title, body in articles(args.language, args.articles):
        r = rewrite(name, title, body, args.language, Path(args.state_dir))
        results.append(r)
        rose = sum(1 for p in r["paragraphs"] if p["kept"])
        tries = sum(len(p["attempts"]) for p in r["paragraphs"])
        for p in r["paragraphs"]:
            for a in p["attempts"]:
                for why in a.get("rejected", "").split("; ") if a.get("rejected") else []:
                    reasons[kind_of(why)] += 1
        print(f"{name} {title[:30]}: rose {rose}/{len(r['paragraphs'])}, {tries} tries, {r['wall_s']} s", flush=True)
    paragraphs = [p for r in results for p in r["paragraphs"]]
    summary = {"language": args.language, "articles": len(results), "paragraphs": len(paragraphs),
               "rose": sum(1 for p in paragraphs if p["kept"]),
               "tries": sum(len(p["attempts"]) for p in paragraphs),
               "wall_s": round(sum(r["wall_s"] for r in results), 1), "rejections": dict(reasons.most_common())}
    summary["rose_share"] = round(summary["rose"] / max(1, summary["paragraphs"]), 3)
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "articles": results}, ensure_ascii=False, indent=1) + "\n",
                                  encoding="utf-8")


if __name__ == "__main__":
    main()
