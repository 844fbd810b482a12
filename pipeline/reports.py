"""Reports built from ledger rows only: one run's report and the daily summary.

Nothing here reads model text, so a report can never repeat a hallucination.
Sinks: the terminal (the CLI renders the dict), a Markdown file under
``[report] markdown_dir``, and a chat webhook in Slack or Feishu/Lark/DingTalk/
WeCom bot format.
"""

from __future__ import annotations

import os
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from sqlmodel import func, select

from .alerts import post_chat
from .config import Config
from .ledger import Ledger
from .models import Article, Claim, Publication, Registration, Run, Topic


def run_summary(ledger: Ledger, run_id: str) -> dict[str, Any]:
    """What the ledger holds for one run: the facts a report may state."""
    with ledger.read() as s:
        run = s.get(Run, run_id)
        topic = s.exec(select(Topic).where(Topic.run_id == run_id)).first()
        pub = s.exec(select(Publication).where(Publication.run_id == run_id, Publication.status == "verified")).first()
        article = s.get(Article, pub.article_id) if pub else s.exec(
            select(Article).where(Article.run_id == run_id, Article.kind == "humanized").order_by(Article.score.desc())).first()
        reg = s.exec(select(Registration).where(Registration.run_id == run_id)).first()
        caught = s.exec(select(func.count()).select_from(Claim).where(Claim.run_id == run_id, Claim.status != "verified")).one()
    return {
        "run_id": run_id,
        "channel": run.channel if run else None,
        "status": run.status if run else None,
        "topic": topic.title if topic else None,
        "title": article.title if (pub and article) else None,
        "score": article.score if article else None,
        "url": pub.url if pub else None,
        "registration_no": reg.registration_no if reg else None,
        "nudges": run.nudges if run else 0,
        "hallucinations_caught": caught,
    }


RUN_LABELS = [("channel", "Channel"), ("topic", "Topic"), ("title", "Title"), ("score", "Humanize score"), ("url", "URL"),
              ("registration_no", "Registration"), ("nudges", "Nudges"), ("hallucinations_caught", "Hallucinations caught")]


def render_run(summary: dict[str, Any]) -> str:
    lines = [f"# Run {summary['run_id']}", ""]
    for key, label in RUN_LABELS:
        value = summary.get(key)
        lines.append(f"- {label}: {value if value not in (None, '') else '—'}")
    return "\n".join(lines) + "\n"


def daily_summary(ledger: Ledger, day: date, tz_name: str) -> dict[str, Any]:
    tz = ZoneInfo(tz_name)
    start = datetime.combine(day, time.min, tzinfo=tz).astimezone(timezone.utc)
    end = start + timedelta(days=1)
    with ledger.read() as s:
        runs = s.exec(select(Run).where(Run.started_at >= start, Run.started_at < end).order_by(Run.started_at)).all()
        ids = [r.id for r in runs]
        pubs = s.exec(select(Publication).where(Publication.run_id.in_(ids), Publication.status == "verified")).all() if ids else []
        regs = s.exec(select(Registration).where(Registration.run_id.in_(ids))).all() if ids else []
        caught = s.exec(select(func.count()).select_from(Claim).where(Claim.run_id.in_(ids), Claim.status != "verified")).one() if ids else 0
    from .reconcile import reconciliations, unregistered

    reconciled = reconciliations(ledger, since=start, until=end)
    awaiting = unregistered(ledger)
    by_status: dict[str, int] = {}
    for r in runs:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    return {
        "date": day.isoformat(), "timezone": tz_name,
        "runs": len(runs), "by_status": by_status,
        "publications": [{"run_id": p.run_id, "url": p.url} for p in pubs],
        "registrations": [r.registration_no for r in regs],
        "hallucinations_caught": caught,
        # Registered today for runs that crashed or were interrupted after publishing (pipeline.reconcile).
        "reconciled": [{k: r[k] for k in ("publication_id", "run_id", "channel", "run_status", "url", "registration_no",
                                          "reconciled_by")} for r in reconciled],
        "awaiting_registration": [{"publication_id": p.id, "run_id": r.id, "channel": r.channel, "run_status": r.status,
                                   "url": p.url} for p, r in awaiting],
        "failures": [{"run_id": r.id, "channel": r.channel, "status": r.status, "exit_code": r.exit_code, "error": r.error}
                     for r in runs if r.status not in ("done", "running")],
    }


def render_daily(summary: dict[str, Any]) -> str:
    lines = [f"# Daily report {summary['date']} ({summary['timezone']})", "",
             f"- Runs: {summary['runs']} "
             + (f"({', '.join(f'{k} {v}' for k, v in sorted(summary['by_status'].items()))})" if summary["by_status"] else ""),
             f"- Publications: {len(summary['publications'])}",
             f"- Registrations: {len(summary['registrations'])}",
             f"- Recovered and registered by reconciliation: {len(summary['reconciled'])}",
             f"- Hallucinations caught: {summary['hallucinations_caught']}",
             f"- Failures: {len(summary['failures'])}"]
    if summary["publications"]:
        lines += ["", "## Publications", *[f"- {p['url']} (run {p['run_id']})" for p in summary["publications"]]]
    if summary["reconciled"]:
        lines += ["", "## Recovered publications", *[
            f"- {r['url']} (run {r['run_id']}, {r['run_status']}) registered as {r['registration_no']} "
            f"by run {r['reconciled_by']}" for r in summary["reconciled"]]]
    if summary["awaiting_registration"]:
        lines += ["", "## Awaiting registration", *[
            f"- {r['url']} (run {r['run_id']}, {r['run_status']}): verified, not registered yet; the next run of "
            f"channel {r['channel']} registers it" for r in summary["awaiting_registration"]]]
    if summary["failures"]:
        lines += ["", "## Failures", *[f"- {f['run_id']} [{f['channel']}] {f['status']} (exit {f['exit_code']}): "
                                        f"`pipeline ledger diff --run {f['run_id']}`" for f in summary["failures"]]]
    return "\n".join(lines) + "\n"


def deliver(cfg: Config, name: str, markdown: str, send: bool = True) -> list[str]:
    """Write the Markdown file and post to the chat webhook, as configured. Returns where it went."""
    sent = []
    if cfg.report.markdown_dir:
        path = cfg.path(cfg.report.markdown_dir) / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(markdown, encoding="utf-8")
        os.replace(tmp, path)
        sent.append(str(path))
    url = cfg.report.webhook_url or (os.environ.get(cfg.report.webhook_url_env, "") if cfg.report.webhook_url_env else "")
    if send and url and post_chat(url, cfg.report.format, markdown):
        sent.append(f"webhook ({cfg.report.format})")
    return sent

