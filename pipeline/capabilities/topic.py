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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import CapabilityError
from pipeline.runtime import deadline
from pipeline.sources.gather import gather, of_topic, split_names, store
from pipeline.text.content import normalize_title
from pipeline.tools.claims import Lexicon
from pipeline.tools.toolbox import RunContext, capability

log = logging.getLogger(__name__)
MAX_FIELD = 300


@dataclass(frozen=True)
class Candidate:
    title: str
    angle: str | None
    source: str
    sources: tuple[str, ...] = ()  # what the article is written from: files, folders, URLs (pipeline.sources.gather)


def _clean(text: str | None) -> str | None:
    if not text:
        return None
    if "<" in text:
        text = re.sub(r"<[^>]+>", " ", text)  # feed summaries carry HTML
    text = " ".join(text.split())
    return text[:MAX_FIELD] or None


def _backlog_rows(path: Path) -> Iterator[tuple[str, str | None, tuple[str, ...]]]:
    """(clean title, raw angle, source names) per backlog entry, in file order, lazily: the topic step stops at the
    first fresh one. A line is ``title | angle | sources`` (files, folders or URLs, separated by spaces); a CSV has
    ``title,angle,keywords,sources`` columns."""
    if not path.exists():
        return
    content = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        for row in csv.DictReader(io.StringIO(content)):
            title = _clean(row.get("title"))
            if title:
                angle = " — ".join(x for x in (_clean(row.get("angle")), _clean(row.get("keywords"))) if x) or None
                yield title, angle, tuple(split_names(row.get("sources")))
        return
    for line in content.splitlines():
        # A comment starts at " #" or a line's "#": a URL's fragment (page#part) is not one.
        line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip()
        if line:
            title, _, rest = line.partition("|")
            angle, _, names = rest.partition("|")
            title = _clean(title)
            if title:
                yield title, angle, tuple(split_names(names))


def iter_backlog(path: Path) -> Iterator[Candidate]:
    source = f"backlog:{path.name}"
    for title, angle, names in _backlog_rows(path):
        yield Candidate(title, _clean(angle), source, names)


def backlog(path: Path) -> list[Candidate]:
    return list(iter_backlog(path))


def feed(source: str, base: Path, timeout_s: float, limit: int) -> list[Candidate]:
    import feedparser
    import httpx

    try:
        if re.match(r"https?://", source):
            # feed_timeout_s bounds the whole fetch: a feed server trickling bytes cannot hold the run.
            resp = deadline.http(httpx.get, source, timeout=timeout_s, follow_redirects=True, total_s=timeout_s)
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
            link = entry.get("link")
            out.append(Candidate(title, _clean(entry.get("summary")), f"feed:{link or source}",
                                 (link,) if link else ()))
    return out


# Enough to have a fresh one when a suggestion repeats a published title; each costs about 30
# generated tokens (1 s on the 2-core embedded model).
BRAINSTORM_CANDIDATES = 3
BRAINSTORM_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "topic_candidates",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["candidates"],
            "properties": {"candidates": {"type": "array", "minItems": 1, "maxItems": BRAINSTORM_CANDIDATES, "items": {
                "type": "object", "additionalProperties": False, "required": ["title", "angle"],
                "properties": {"title": {"type": "string"}, "angle": {"type": "string"}}}}},
        },
    },
}


def brainstorm(ctx: RunContext, published: list[str]) -> list[Candidate]:
    reply = ctx.llm.complete([
        {"role": "system", "content": ctx.prompts.render("topic.md", niche=ctx.settings.topic.niche, count=BRAINSTORM_CANDIDATES)},
        {"role": "user", "content": "Already published (do not repeat):\n" + ("\n".join(published[-50:]) or "(nothing yet)")},
    ], response_format=BRAINSTORM_SCHEMA, max_tokens=60 * BRAINSTORM_CANDIDATES)
    try:
        items = json.loads(reply.text)["candidates"]
        return [Candidate(_clean(i["title"]), _clean(i.get("angle")), "llm") for i in items if _clean(i.get("title"))]
    except (ValueError, KeyError, TypeError):
        raise CapabilityError("brainstorming returned no usable topic candidates; call topic again") from None


class Repeats:
    """Published titles, indexed so that checking a candidate does not grow with the history.

    A repeat is a title whose difflib ratio to a published one reaches the threshold. Exact
    matches (most repeats: a backlog line published before) are a set lookup. For the rest,
    two upper bounds on the ratio, both computed for all titles at once by C string methods,
    discard nearly every title before difflib runs:

        ratio = 2·M / (len(a) + len(b)),  M ≤ min(len(a) − k, len(b))

    where M is the number of matched characters and k the number of characters of the
    published title ``a`` that do not occur in the candidate ``b`` at all (one ``translate``
    over every title joined). The few titles left go through difflib's own bounds
    (real_quick_ratio, quick_ratio) and then the exact ratio, in the original argument order:
    the verdicts are those of comparing with every title, at a fraction of the cost.
    """

    def __init__(self, published: Iterable[str], threshold: float) -> None:
        self.threshold = threshold
        self.exact = set(published)
        self._titles = list(self.exact)
        self._lengths = list(map(len, self._titles))
        # Normalised titles hold no newline (normalize_title folds \W+ to a space): a safe separator.
        self._joined = "\n".join(self._titles)

    def __call__(self, title: str) -> bool:
        norm = normalize_title(title)
        if norm in self.exact:
            return True
        if not self._titles:
            return False
        t, lb = self.threshold, len(norm)
        if t <= 0:
            return True
        # k for every title at once: delete the candidate's characters, measure what is left.
        foreign = map(len, self._joined.translate({ord(c): None for c in set(norm)}).split("\n"))
        bound = difflib.SequenceMatcher(None, "", norm)  # norm as seq2: its counts are built once
        for p, la, k in zip(self._titles, self._lengths, foreign, strict=False):
            if 2 * min(la - k, lb) < t * (la + lb):
                continue
            bound.set_seq1(p)
            if bound.quick_ratio() >= t and difflib.SequenceMatcher(None, norm, p).ratio() >= t:
                return True
        return False


def is_repeat(title: str, published: list[str], threshold: float) -> bool:
    return Repeats(published, threshold)(title)


def _published_titles(ctx: RunContext) -> tuple[list[str], set[str]]:
    """Normalised titles of published topics, oldest first, and the same titles as they were stored.

    One plain query on the DB-API cursor: with ten thousand publications, building rows
    through the ORM would cost more than the whole check.
    """
    from pipeline.ledger.models import Publication, Topic

    query = (f"SELECT t.normalized, t.title FROM {Topic.__tablename__} t WHERE t.run_id IN "
             f"(SELECT run_id FROM {Publication.__tablename__} WHERE status = 'verified') ORDER BY t.id")
    with ctx.ledger.read() as s:
        rows = s.connection().exec_driver_sql(query).fetchall()
    return list(dict.fromkeys(r[0] for r in rows)), {r[1] for r in rows}


def _first_fresh(candidates: Iterable[Candidate], repeats: Repeats) -> Candidate | None:
    return next((c for c in candidates if not repeats(c.title)), None)


LEXICON = Lexicon(
    verbs=(
        "已(经)?(选定|确定|选好|定好)",
        "选题(已|为)",
        r"\b(picked|chose|chosen|selected|locked in|settled on|decided on)\b[^.]{0,25}\b(topic|angle|subject)\b",
        r"^\W*topic\s*[:：]\s*[\"“'《]?\w+(\s+\w+)+",  # "Topic: Why SQLite WAL mode matters" names the chosen one
        r"\btopic\b[^.]{0,40}\b(selected|chosen|picked|locked in|decided|set)\b",
        r"\btoday'?s topic (is|was)\b",
        r"\b(I|we) (have|'ve got|got) (a|the) topic\b",
    ),
    zh_step="选题|题目|选好",
    en_step=r"\btopics?\b",
)


@capability(order=10, fact="title", lexicon=LEXICON)
def topic(ctx: RunContext) -> dict[str, Any]:
    """Pick the next topic for this run. Returns topic_id, title and angle. Call it first."""
    from sqlmodel import select

    from pipeline.ledger.models import Topic

    with ctx.ledger.read() as s:
        chosen = s.exec(select(Topic).where(Topic.run_id == ctx.run_id).order_by(Topic.id)).first()
    if chosen is None:
        t = ctx.settings.topic
        published, stored = _published_titles(ctx)
        repeats = Repeats(published, t.similarity_threshold)
        # Sources in order, each consulted only when the ones before hold nothing fresh.
        pick = None
        if t.backlog:
            path = ctx.settings.path(t.backlog)
            # Titles only, until one is fresh: a Candidate is built for the pick alone.
            row = next(((title, angle, names) for title, angle, names in _backlog_rows(path)
                        if title not in stored and not repeats(title)), None)
            pick = Candidate(row[0], _clean(row[1]), f"backlog:{path.name}", row[2]) if row else None
        for source in t.feeds:
            if pick is not None:
                break
            pick = _first_fresh(feed(source, ctx.settings.base_dir, t.feed_timeout_s, t.max_feed_items), repeats)
        if pick is None:
            pick = _first_fresh(brainstorm(ctx, published), repeats)
        if pick is None:
            raise CapabilityError("every candidate topic repeats a published one; call topic again for new ideas")
        with ctx.ledger.write() as s:
            chosen = Topic(run_id=ctx.run_id, title=pick.title, normalized=normalize_title(pick.title),
                           angle=pick.angle, source=pick.source)
            s.add(chosen)
        # Read once, when the topic is chosen: the article is written from what the sources said then.
        base = ctx.settings.path(t.backlog).parent if t.backlog and pick.source.startswith("backlog:") \
            else ctx.settings.base_dir
        store(ctx.ledger, chosen.id, gather(list(pick.sources), base, t.feed_timeout_s))
    found = of_topic(ctx.ledger, chosen.id)
    return {"topic_id": chosen.id, "title": chosen.title, "angle": chosen.angle, "source": chosen.source,
            "sources": [f"{src.title} ({src.url or src.location.rsplit('/', 1)[-1]})" for src in found]}
