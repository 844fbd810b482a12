"""topic: pick the next topic from the backlog, never one already published.

The backlog is a text file (``[topic] backlog``), one topic a line, optionally
``title | angle``; ``#`` starts a comment. When it is exhausted the model
brainstorms one for ``[topic] niche``. Calling ``topic`` twice in a run
returns the same topic, so a retry or a nudge never changes course.
"""

from __future__ import annotations

from sqlmodel import select

from pipeline.content import normalize_title
from pipeline.errors import CapabilityError
from pipeline.models import Publication, Topic
from pipeline.tools import RunContext, capability


def _backlog(ctx: RunContext) -> list[tuple[str, str | None]]:
    if not ctx.cfg.topic.backlog:
        return []
    path = ctx.cfg.path(ctx.cfg.topic.backlog)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            title, _, angle = line.partition("|")
            out.append((title.strip(), angle.strip() or None))
    return out


def _used_titles(ctx: RunContext) -> set[str]:
    with ctx.ledger.read() as s:
        rows = s.exec(
            select(Topic.normalized).join(Publication, Publication.run_id == Topic.run_id).where(Publication.status == "verified")
        )
        return set(rows)


def _brainstorm(ctx: RunContext, used: set[str]) -> tuple[str, str | None]:
    reply = ctx.llm.complete([
        {"role": "system", "content": ctx.prompts.render("topic.md", niche=ctx.cfg.topic.niche)},
        {"role": "user", "content": "Already published:\n" + ("\n".join(sorted(used)) or "(nothing yet)")},
    ], max_tokens=60)
    title = reply.text.strip().splitlines()[0].strip(" #\"'") if reply.text.strip() else ""
    if not title:
        raise CapabilityError("could not find a new topic: the backlog is exhausted and brainstorming gave nothing")
    return title, None


@capability
def topic(ctx: RunContext) -> dict:
    """Pick the next topic for this run. Returns topic_id, title and angle. Call it first."""
    with ctx.ledger.read() as s:
        chosen = s.exec(select(Topic).where(Topic.run_id == ctx.run_id).order_by(Topic.id)).first()
    if chosen is None:
        used = _used_titles(ctx)
        candidates = [(t, a, "backlog") for t, a in _backlog(ctx) if normalize_title(t) not in used]
        title, angle, source = candidates[0] if candidates else (*_brainstorm(ctx, used), "llm")
        with ctx.ledger.write() as s:
            chosen = Topic(run_id=ctx.run_id, title=title, normalized=normalize_title(title), angle=angle, source=source)
            s.add(chosen)
    return {"topic_id": chosen.id, "title": chosen.title, "angle": chosen.angle, "source": chosen.source}
