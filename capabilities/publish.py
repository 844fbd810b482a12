"""publish: put a humanized article on the configured platform, once, and verify it.

Order of events, each step committed before the next:

1. The idempotency key ``sha256(run, article, content hash)`` goes into the
   ledger under a UNIQUE constraint (status ``pending``) *before* the external
   call. A repeat with the same key returns the first publication.
2. The publisher writes the article and returns its URL.
3. Verification: the URL's host is on ``allowed_domains``, the publisher's own
   check passes (the file is on disk with this content hash), and, if the site
   is being served, the URL answers HEAD with 2xx/3xx.
4. Only then is the row marked ``verified``, and only then is the tool result
   (and so the fact) recorded. One verified publication per run: retries and
   nudges can never publish twice.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

import httpx
from sqlmodel import select

from pipeline.content import slugify
from pipeline.errors import CapabilityError
from pipeline.models import Article, Publication, utcnow
from pipeline.publishers import Published, get_publisher
from pipeline.tools import RunContext, capability
from pipeline.verify import check_url, host_allowed


def _result(p: Publication, **extra) -> dict:
    return {"publication_id": p.id, "url": p.url, "verified": p.status == "verified", "target": p.target, **extra}


def _verify(ctx: RunContext, publisher, published: Published, digest: str) -> str | None:
    """None when the publication is verified, else the reason it is not."""
    allowed = ctx.cfg.publish.allowed_domains
    if not host_allowed(published.url, allowed):
        return f"{published.url} is not on [publish] allowed_domains {allowed}"
    problem = publisher.verify_local(published, digest)
    if problem:
        return problem
    result = check_url(published.url, allowed, ctx.cfg.publish.verify_timeout_s)
    if result.ok:
        return None
    if published.local_check and "ConnectError" in result.detail:
        # The local site is not being served right now; the file check above is the proof.
        return None
    return result.detail


@capability
def publish(ctx: RunContext, article_id: Annotated[int, "The article_id returned by humanize."]) -> dict:
    """Publish a humanized article to the configured platform and verify its URL. Returns publication_id and url."""
    with ctx.ledger.read() as s:
        article = s.get(Article, article_id)
        done = s.exec(select(Publication).where(Publication.run_id == ctx.run_id, Publication.status == "verified")).first()
    if done is not None:
        return _result(done, replayed=True, note="this run has already published; not publishing again")
    if article is None or article.run_id != ctx.run_id:
        raise CapabilityError(f"no article {article_id} in this run; pass the article_id returned by humanize")
    if article.kind != "humanized":
        raise CapabilityError(f"article {article_id} is a draft; call humanize and publish the article_id it returns")
    threshold = ctx.cfg.humanize.threshold
    if article.score is None or article.score < threshold:
        raise CapabilityError(f"article {article_id} scored {article.score}, below the threshold {threshold}; call humanize on the draft again")

    key = hashlib.sha256(f"{ctx.run_id}:{article.id}:{article.content_hash}".encode()).hexdigest()
    publisher = get_publisher(ctx.cfg)
    with ctx.ledger.write() as s:
        row = s.exec(select(Publication).where(Publication.idempotency_key == key)).first()
        if row is None:
            row = Publication(run_id=ctx.run_id, article_id=article.id, idempotency_key=key,
                              target=publisher.name, content_hash=article.content_hash)
            s.add(row)
    if row.status == "verified":
        return _result(row, replayed=True)

    try:
        published = publisher.publish(key=key, slug=slugify(article.title, f"a{article.id}-{key[:8]}"),
                                      title=article.title, body_markdown=article.body, content_hash=article.content_hash)
    except (OSError, httpx.HTTPError) as exc:
        with ctx.ledger.write() as s:
            row = s.get(Publication, row.id)
            row.status, row.verification = "failed", f"{type(exc).__name__}: {exc}"
            s.add(row)
        raise CapabilityError(f"publishing to {publisher.name} failed: {exc}") from None

    problem = _verify(ctx, publisher, published, article.content_hash)
    with ctx.ledger.write() as s:
        row = s.get(Publication, row.id)
        row.url = published.url
        row.status = "unverified" if problem else "verified"
        row.verification = problem or "ok"
        row.verified_at = None if problem else utcnow()
        s.add(row)
    if problem:
        raise CapabilityError(f"published to {published.url} but it could not be verified: {problem}")
    return _result(row)
