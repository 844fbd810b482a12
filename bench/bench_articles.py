"""Benchmark: what the shipped config publishes on the embedded model, and how long it takes (issue 22).

    .venv/bin/python bench/bench_articles.py [--en 5] [--zh 5] [--out bench/results/articles.json]

Each run is ``pipeline run --config config.toml`` in its own process, as cron starts it, on one topic
(the first lines of topics.txt / topics.zh.txt, in turn: English, Chinese, English …), with the ledger,
site, previews and reports in a temporary directory (the models assembled under ./var are reused).
Per run, from the process and its ledger:

* exit code and run status (done, or incomplete: held below the humanize pass mark for an editor);
* the completeness checks of the stored article (``pipeline.text.article.check`` again, on the final body),
  its length, and whether it was published;
* the humanize score before and after the rewrites, and how many rewritten paragraphs rose;
* wall time, the sum of every model call's latency (agent turns and capability side calls, as the
  ledger records them), their ratio (the run's overhead: scoring, checks, ledger, start-up), and peak resident
  memory: ``peak_rss_mb`` is the sum of each process's own peak (``VmHWM``; the run and its scoring model's process,
  ``pipeline.model.local.scorer_process``), read every 0.2 s while they live: never less than the two held at any one
  moment. ``rss_together_mb``: the most the two held at one of those readings (a spike between them is missed).
  ``peak_rss_largest_mb`` is ``wait4``'s ru_maxrss: the largest single process's.

Writes the runs and their medians to ``--out`` and the article bodies beside it (``articles/``).
``BENCH_KEEP_LEDGERS=DIR`` copies each run's ledger there; ``BENCH_KEEP_DIRS=DIR`` keeps each run's whole
directory (ledger, site, previews), so that a held article can be approved and its page read afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.text import article as art  # noqa: E402


def topics(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


def one_run(topic_line: str, language: str, keep: Path) -> dict:
    # BENCH_KEEP_DIRS=DIR keeps each run's ledger, site and previews in DIR/<n>.<language>, for approving a held
    # article there afterwards (pipeline review approve, with the same PIPELINE_* paths) and reading its page.
    kept = os.environ.get("BENCH_KEEP_DIRS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
    with (tempfile.TemporaryDirectory() if not kept else contextlib.nullcontext(
            tempfile.mkdtemp(prefix=f"{language}.", dir=kept))) as tmp:
        backlog = Path(tmp) / "topics.txt"
        backlog.write_text(topic_line + "\n", encoding="utf-8")
        shutil.copytree(REPO / "notes", Path(tmp) / "notes")  # the sources the line names, relative to its backlog
        env = {**os.environ, "PIPELINE_LEDGER__URL": f"sqlite:///{tmp}/ledger.db",
               "PIPELINE_PUBLISH_LOCAL__DIR": f"{tmp}/site", "PIPELINE_REPORT__MARKDOWN_DIR": f"{tmp}/reports",
               "PIPELINE_PUBLISH__PREVIEW_DIR": f"{tmp}/preview", "PIPELINE_DAEMON__STATE_DIR": str(REPO / "var"),
               "PIPELINE_TOPIC__BACKLOG": str(backlog), "PIPELINE_DRAFT__LANGUAGE": language,
               "PIPELINE_AGENT__LANGUAGE": language}
        started = time.perf_counter()
        proc = subprocess.Popen([str(REPO / ".venv/bin/pipeline"), "run", "--config", str(REPO / "config.toml")],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        peaks: dict[int, int] = {}
        together = [0]
        watcher = threading.Thread(target=watch_peaks, args=(proc.pid, peaks, together), daemon=True)
        watcher.start()
        output = proc.stdout.read().decode("utf-8", "replace")
        _, status, usage = os.wait4(proc.pid, 0)
        watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        if os.environ.get("BENCH_KEEP_LEDGERS"):  # for reading a run afterwards (pipeline ledger show …)
            shutil.copy(Path(tmp) / "ledger.db", Path(os.environ["BENCH_KEEP_LEDGERS"]) / f"{time.time():.0f}.{language}.db")
        return {"topic": topic_line.split("|")[0].strip(), "language": language, "exit_code": proc.returncode,
                "wall_s": round(wall, 1), "peak_rss_mb": round(max(sum(peaks.values()), usage.ru_maxrss) / 1024),
                "peak_rss_largest_mb": round(usage.ru_maxrss / 1024), "rss_together_mb": round(together[0] / 1024),
                "processes": len(peaks), "output_tail": output[-600:],
                **from_ledger(Path(tmp) / "ledger.db", language, keep)}


def watch_peaks(root: int, peaks: dict[int, int], together: list[int]) -> None:
    """Each process's peak resident memory (kB), ``root`` and its descendants, until ``root`` is gone; and in
    ``together[0]`` the most they held at one reading."""
    while True:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
        tree, todo = [], [root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        now = 0
        for pid in tree:
            with contextlib.suppress(OSError, StopIteration, ValueError):
                status = Path(f"/proc/{pid}/status").read_text()
                if "\nState:\tZ" in status:  # exited, not yet reaped: no memory, no VmHWM
                    continue
                fields = {ln.split(":")[0]: ln.split()[1] for ln in status.splitlines() if ln.startswith(("VmHWM:", "VmRSS:"))}
                peaks[pid] = max(peaks.get(pid, 0), int(fields["VmHWM"]))
                now += int(fields["VmRSS"])
        together[0] = max(together[0], now)
        with contextlib.suppress(OSError):
            if "\nState:\tZ" not in Path(f"/proc/{root}/status").read_text():
                time.sleep(0.2)
                continue
        return


def from_ledger(path: Path, language: str, keep: Path) -> dict:
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    run = db.execute("SELECT * FROM runs").fetchone()
    turns = db.execute("SELECT COALESCE(SUM(latency_ms), 0), COUNT(*) FROM turns WHERE role = 'assistant'").fetchone()
    side = db.execute("SELECT COALESCE(SUM(latency_ms), 0), COUNT(*), COALESCE(SUM(completion_tokens), 0) "
                      "FROM model_calls").fetchone()
    scoring = db.execute("SELECT COALESCE(SUM(latency_ms), 0) FROM model_calls WHERE requested_model != ?",
                         (run["model"],)).fetchone()[0]  # the scoring model's passes (pipeline.score.scoring records them)
    out: dict = {"status": run["status"], "error": (run["error"] or "")[:400], "agent_turns": turns[1],
                 "side_calls": side[1], "generated_tokens": side[2],
                 "model_s": round((turns[0] + side[0]) / 1000, 1), "scoring_s": round(scoring / 1000, 1)}
    draft = db.execute("SELECT * FROM articles WHERE kind = 'draft' ORDER BY id DESC").fetchone()
    final = db.execute("SELECT * FROM articles WHERE kind = 'humanized' ORDER BY id DESC").fetchone()
    topic = db.execute("SELECT title FROM topics ORDER BY id").fetchone()
    out["drafts_failed"] = db.execute("SELECT COUNT(*) FROM executions WHERE capability = 'draft' AND ok = 0").fetchone()[0]
    article = final or draft
    if article is None:
        return out
    checks = json.loads(draft["checks_json"] or "{}") if draft is not None else {}
    problems = art.check(article["title"], article["body"], topic=topic["title"] if topic else article["title"],
                         language=language, min_length=0)
    out.update({"title": article["title"], "length": art.body_length(article["body"], language),
                "unit": art.unit(language), "final_checks": [str(p) for p in problems],
                "repairs": [r["part"] for r in checks.get("repairs", [])],
                "published": db.execute("SELECT COUNT(*) FROM publications WHERE status = 'verified'").fetchone()[0] > 0})
    if final is not None and final["paragraphs_json"]:
        rewrites = json.loads(final["paragraphs_json"])
        rewritten = rewrites.get("paragraphs", [])
        out.update({"score_before": rewrites.get("before"), "score_after": rewrites.get("after"),
                    "rewritten": len(rewritten), "rose": sum(1 for p in rewritten if p.get("kept"))})
    # Grounding (issue 48): what the draft's check caught and took out, what is left in the stored article (0 is the
    # bar), and the citations: sections citing a source, of all sections.
    removed = json.loads(draft["grounding_json"]).get("removed", []) if draft is not None and draft["grounding_json"] else []
    if article["grounding_json"]:
        summary = json.loads(article["grounding_json"])["summary"]
        prose = art.without_sources(article["body"])
        sections = [sec for sec in article["body"].split("\n## ")[1:] if not sec.startswith(tuple(art.SOURCES_HEADING.values()))]
        out.update({"unsupported_removed": len(removed), "unsupported_left": summary["unsupported"],
                    "statements": summary["counts"], "sources": len(art.sources_listed(article["body"])),
                    "sections_cited": sum(1 for sec in sections if art.CITATION.search(sec)), "sections": len(sections),
                    "prose_length": art.body_length(prose, language)})
    name = f"{run['id']}.{language}.md"
    (keep / name).write_text(f"# {article['title']}\n\n{article['body']}\n", encoding="utf-8")
    out["body_file"] = name
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--en", type=int, default=5)
    ap.add_argument("--zh", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "articles.json")
    args = ap.parse_args()
    en, zh = topics(REPO / "topics.txt")[: args.en], topics(REPO / "topics.zh.txt")[: args.zh]
    order = [(t, "en") for t in en]
    for i, t in enumerate(zh):
        order.insert(min(len(order), 2 * i + 1), (t, "zh"))
    keep = args.out.parent / "articles"
    keep.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    for topic_line, language in order:
        runs.append(one_run(topic_line, language, keep))
        r = runs[-1]
        print(f"{language} {r['exit_code']} {r.get('status')} {r['wall_s']:6.1f}s model {r.get('model_s')}s "
              f"{r.get('length')} {r.get('unit', '')} checks {len(r.get('final_checks', []))} "
              f"score {r.get('score_before')}->{r.get('score_after')} rose {r.get('rose')}/{r.get('rewritten')} "
              f"rss {r['peak_rss_mb']} MB  {r['topic']}", flush=True)
        write(args.out, runs)
    write(args.out, runs)


def write(out: Path, runs: list[dict]) -> None:
    summary: dict = {"runs": len(runs)}
    for language in ("en", "zh"):
        rs = [r for r in runs if r["language"] == language]
        if not rs:
            continue
        walls = [r["wall_s"] for r in rs]
        overhead = [r["wall_s"] / r["model_s"] for r in rs if r.get("model_s")]
        rewritten = sum(r.get("rewritten", 0) for r in rs)
        summary[language] = {
            "runs": len(rs), "exit_codes": [r["exit_code"] for r in rs],
            "articles_stored": sum(1 for r in rs if "length" in r),
            "passing_every_check": sum(1 for r in rs if "length" in r and not r["final_checks"]),
            "lengths": [r.get("length") for r in rs],
            "published": sum(1 for r in rs if r.get("published")),
            "reached_pass_mark": sum(1 for r in rs if r["exit_code"] == 0),
            "rewrites_rose": f"{sum(r.get('rose', 0) for r in rs)}/{rewritten}",
            "median_wall_s": statistics.median(walls), "median_overhead": round(statistics.median(overhead), 3)
            if overhead else None, "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
        }
    out.write_text(json.dumps({"summary": summary, "runs": runs}, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
