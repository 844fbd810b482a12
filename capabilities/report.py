"""report: the run's report, built from ledger rows only — never from model text."""

from __future__ import annotations

from sqlmodel import select

from pipeline.models import Article, Claim, Publication, Registration, Report, Run, Topic
from pipeline.tools import RunContext, capability


def run_summary(ledger, run_id: str) -> dict:
    """What the ledger holds for one run: the facts a report may state."""
    with ledger.read() as s:
        run = s.get(Run, run_id)
        topic = s.exec(select(Topic).where(Topic.run_id == run_id)).first()
        article = s.exec(select(Article).where(Article.run_id == run_id, Article.kind == "humanized")
                         .order_by(Article.score.desc())).first()
        pub = s.exec(select(Publication).where(Publication.run_id == run_id, Publication.status == "verified")).first()
        reg = s.exec(select(Registration).where(Registration.run_id == run_id)).first()
        caught = len(s.exec(select(Claim).where(Claim.run_id == run_id, Claim.status != "verified")).all())
    return {
        "run_id": run_id,
        "status": run.status if run else None,
        "topic": topic.title if topic else None,
        "title": pub and article and article.title,
        "score": article.score if article else None,
        "url": pub.url if pub else None,
        "registration_no": reg.registration_no if reg else None,
        "nudges": run.nudges if run else 0,
        "hallucinations_caught": caught,
    }


def render(summary: dict) -> str:
    lines = [f"Run {summary['run_id']}"]
    for key, label in [("topic", "Topic"), ("title", "Title"), ("score", "Humanize score"), ("url", "URL"),
                       ("registration_no", "Registration"), ("nudges", "Nudges"), ("hallucinations_caught", "Hallucinations caught")]:
        value = summary.get(key)
        lines.append(f"- {label}: {value if value not in (None, '') else '—'}")
    return "\n".join(lines)


@capability
def report(ctx: RunContext) -> dict:
    """Write this run's report from the ledger (topic, title, score, URL, registration). Call it last."""
    summary = run_summary(ctx.ledger, ctx.run_id)
    body = render(summary)
    with ctx.ledger.write() as s:
        row = Report(run_id=ctx.run_id, body=body)
        s.add(row)
    return {"report_id": row.id, "report": body}
