"""topic: pick the next topic, never one already published.

Sources, in order: the backlog file (``[topic] backlog``: ``title | angle`` a
line, or a CSV with a ``title,angle,keywords`` header), then RSS/Atom feeds
(``[topic] feeds``, parsed by feedparser), then, as a fallback, the model
brainstorms candidates for ``[topic] niche`` in a JSON-schema constrained
answer. A candidate whose normalised title is within
``similarity_threshold`` of a topic that was published before is skipped.

Feed text is untrusted input: it is stored and later *quoted* to the model as
data (see ``prompts/draft_user.md``), with newlines removed and length capped,
never spliced into instructions.

Calling ``topic`` twice in one run returns the same topic, so a retry or a
nudge never changes course.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlmodel import select

from pipeline.content import normalize_title
from pipeline.errors import CapabilityError
from pipeline.models import Publication, Topic
from pipeline.tools import RunContext, capability

log = logging.getLogger(__name__)
MAX_FIELD = 300


@dataclass(frozen=True)
class Candidate:
    title: str
    angle: str | None
    source: str


def _clean(text: str | None) -> str | None:
    if not text:
        return None
    text = re.sub(r"<[^>]+>", " ", text)  # feed summaries carry HTML
    text = " ".join(text.split())
    return text[:MAX_FIELD] or None


def backlog(path: Path) -> list[Candidate]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        rows = csv.DictReader(io.StringIO(text))
        out = []
        for row in rows:
            title = _clean(row.get("title"))
            if title:
                angle = " — ".join(x for x in (_clean(row.get("angle")), _clean(row.get("keywords"))) if x) or None
                out.append(Candidate(title, angle, f"backlog:{path.name}"))
        return out
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            title, _, angle = line.partition("|")
            out.append(Candidate(_clean(title), _clean(angle), f"backlog:{path.name}"))
    return [c for c in out if c.title]


def feed(source: str, base: Path, timeout_s: float, limit: int) -> list[Candidate]:
    import feedparser

    try:
        if re.match(r"https?://", source):
            resp = httpx.get(source, timeout=timeout_s, follow_redirects=True)
            resp.raise_for_status()
            raw = resp.content
        else:
            raw = (base / source).read_bytes()
    except (httpx.HTTPError, OSError) as exc:
        log.warning("feed %s unavailable: %s", source, exc)  # one bad feed must not stop the run
        return []
    parsed = feedparser.parse(raw)
    out = []
    for entry in parsed.entries[:limit]:
        title = _clean(entry.get("title"))
        if title:
            out.append(Candidate(title, _clean(entry.get("summary")), f"feed:{entry.get('link') or source}"))
    return out


BRAINSTORM_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "topic_candidates",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["candidates"],
            "properties": {"candidates": {"type": "array", "minItems": 1, "maxItems": 5, "items": {
                "type": "object", "additionalProperties": False, "required": ["title", "angle"],
                "properties": {"title": {"type": "string"}, "angle": {"type": "string"}}}}},
        },
    },
}


def brainstorm(ctx: RunContext, published: list[str]) -> list[Candidate]:
    reply = ctx.llm.complete([
        {"role": "system", "content": ctx.prompts.render("topic.md", niche=ctx.cfg.topic.niche)},
        {"role": "user", "content": "Already published (do not repeat):\n" + ("\n".join(published[-50:]) or "(nothing yet)")},
    ], response_format=BRAINSTORM_SCHEMA, max_tokens=300)
    try:
        items = json.loads(reply.text)["candidates"]
        return [Candidate(_clean(i["title"]), _clean(i.get("angle")), "llm") for i in items if _clean(i.get("title"))]
    except (ValueError, KeyError, TypeError):
        raise CapabilityError("brainstorming returned no usable topic candidates; call topic again") from None


def is_repeat(title: str, published: list[str], threshold: float) -> bool:
    norm = normalize_title(title)
    return any(difflib.SequenceMatcher(None, norm, p).ratio() >= threshold for p in published)


def _published_titles(ctx: RunContext) -> list[str]:
    with ctx.ledger.read() as s:
        rows = s.exec(select(Topic.normalized).join(Publication, Publication.run_id == Topic.run_id)
                      .where(Publication.status == "verified"))
        return list(dict.fromkeys(rows))


@capability
def topic(ctx: RunContext) -> dict:
    """Pick the next topic for this run. Returns topic_id, title and angle. Call it first."""
    with ctx.ledger.read() as s:
        chosen = s.exec(select(Topic).where(Topic.run_id == ctx.run_id).order_by(Topic.id)).first()
    if chosen is None:
        t = ctx.cfg.topic
        published = _published_titles(ctx)
        fresh = lambda cands: [c for c in cands if not is_repeat(c.title, published, t.similarity_threshold)]  # noqa: E731
        candidates = fresh(backlog(ctx.cfg.path(t.backlog))) if t.backlog else []
        for source in t.feeds:
            if candidates:
                break
            candidates = fresh(feed(source, ctx.cfg.base_dir, t.feed_timeout_s, t.max_feed_items))
        if not candidates:
            candidates = fresh(brainstorm(ctx, published))
        if not candidates:
            raise CapabilityError("every candidate topic repeats a published one; call topic again for new ideas")
        pick = candidates[0]
        with ctx.ledger.write() as s:
            chosen = Topic(run_id=ctx.run_id, title=pick.title, normalized=normalize_title(pick.title),
                           angle=pick.angle, source=pick.source)
            s.add(chosen)
    return {"topic_id": chosen.id, "title": chosen.title, "angle": chosen.angle, "source": chosen.source}
