"""Publishing an article on the configured platform, once, verified (the work of the ``publish`` capability).

Order of events, each step committed before the next:

1. The idempotency key ``sha256(run, article, content hash)`` goes into the
   ledger under a UNIQUE constraint (status ``pending``) *before* the external
   call. A repeat with the same key returns the first publication.
2. If that row already existed and is not verified, an earlier attempt may
   have reached the platform and died before writing down the result (a
   crash, a timeout). The publisher's ``find`` is asked *first*, and a post
   carrying this key is adopted instead of posting a second one.
3. Otherwise the publisher writes the article and returns its URL.
4. Verification: the URL's host is on ``allowed_domains``, the publisher's own
   check passes (the file is on disk with this content hash), and, if the site
   is being served, the URL answers HEAD with 2xx/3xx.
5. Only then is the row marked ``verified``, and only then is the tool result
   (and so the fact) recorded. One verified publication per run: retries and
   nudges can never publish twice.

A row stays ``pending`` while the outcome on the platform is unknown: after a
crash, or a create that timed out and could not be found. ``recover_pending``
settles such rows once their run is over, so the ledger and the platform
agree again (``pipeline.publishing.settle``); the runner calls it at start.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlmodel import select

from ..config import PublishConfig
from ..errors import (
    AwaitingReview,
    CapabilityError,
    ConfigError,
    DeadlineExceeded,
    DryRunDone,
    PlatformUnavailableError,
    PublicationFailed,
    PublicationSubmitted,
    RunInterrupted,
)
from ..ledger.models import Article, Publication, Run, Topic
from ..ledger.utc import utcnow
from ..ledger.writer import Ledger
from ..states import PublicationStatus
from ..text.content import slugify
from ..tools.toolbox import RunContext
from ._verify import check_url, host_allowed
from .publishers import (
    LookupUnsupported,
    Published,
    Publisher,
    PublishOutcomeUnknown,
    get_publisher,
    same_content,
)
from .publishers.remote import AttemptBudget, RemotePublisher

log = logging.getLogger(__name__)

RECOVERED = "recovered after crash"


def _result(p: Publication, **extra: Any) -> dict[str, Any]:
    return {"publication_id": p.id, "url": p.url, "verified": p.status == PublicationStatus.VERIFIED, "target": p.target, **extra}


def idempotency_key(run_id: str, article: Article) -> str:
    return hashlib.sha256(f"{run_id}:{article.id}:{article.content_hash}".encode()).hexdigest()


def slug_for(article: Article, key: str) -> str:
    return slugify(article.title, f"a{article.id}-{key[:8]}")


def verify_published(publish: PublishConfig, publisher: Publisher, published: Published, digest: str) -> str | None:
    """None when the publication is verified, else the reason it is not."""
    allowed = publish.allowed_domains
    if not host_allowed(published.url, allowed):
        return f"{published.url} is not on [publish] allowed_domains {allowed}"
    problem = publisher.verify_local(published, digest)
    if problem:
        return problem
    result = check_url(published.url, allowed, publish.verify_timeout_s)
    serves = getattr(publisher, "check_address", None)
    give_up = time.monotonic() + publish.verify_timeout_s
    while result.refused and serves is not None and serves() is not None:
        # Nothing answers at the URL: a refused connection never counts as verified. The local site, not
        # being served now, is served for the check (a loopback base_url only: LocalSitePublisher.serving).
        with publisher.serving() as ours:  # the local site's, as check_address says
            if ours:
                result = check_url(published.url, allowed, publish.verify_timeout_s)
                break
        if time.monotonic() > give_up:
            break
        time.sleep(0.05)  # another process's check server held the port and has just closed: ask again
        result = check_url(published.url, allowed, publish.verify_timeout_s)
    return None if result.ok else result.detail


def record_post(row: Publication, published: Published, problem: str | None, verification: str) -> None:
    """A post the platform holds, written into its row: ``verified``, or ``unverified`` because of ``problem``."""
    row.url, row.remote_id = published.url, published.remote_id
    row.status = PublicationStatus.UNVERIFIED if problem else PublicationStatus.VERIFIED
    row.verification = verification
    row.verified_at = None if problem else utcnow()


# A pending row's verification starts with this when its post was written but could not be verified: the post is
# withdrawn where the publisher can (the local site), and the row is the one the next attempt reuses.
WRITTEN_UNVERIFIED = "written but not verified"
WITHDRAWN = "withdrawn"


def hold_unverified(ledger: Ledger, publisher: Publisher, row_id: int, published: Published, problem: str) -> Publication:
    """A post the platform holds but that did not verify: taken down where the publisher can (``withdraw``: the local
    site's page, index and feed), and its row kept ``pending`` with the URL and the platform's id, so that the next
    attempt, in this run or the next, reuses this publication and never makes a second one."""
    withdraw = getattr(publisher, "withdraw", None)
    if withdraw is not None:
        withdraw(published)
    with ledger.write() as s:
        row = s.get(Publication, row_id)
        row.url, row.remote_id = published.url, published.remote_id
        row.status, row.verified_at = PublicationStatus.PENDING, None
        where = WITHDRAWN if withdraw is not None else f"still on {publisher.name}"
        row.verification = f"{WRITTEN_UNVERIFIED}: {problem}; {where}"
        s.add(row)
    return row


def held_unverified(row: Publication) -> bool:
    """A row ``hold_unverified`` left: pending, its post written but not verified."""
    return row.status == PublicationStatus.PENDING and (row.verification or "").startswith(WRITTEN_UNVERIFIED)


def withdrawn(row: Publication) -> bool:
    """A held row whose post was taken down: nothing of it is live."""
    return held_unverified(row) and (row.verification or "").endswith(f"; {WITHDRAWN}")


def _settle(ledger: Ledger, row_id: int, published: Published, problem: str | None, note: str) -> Publication:
    """Write the outcome of a publication that reached the platform."""
    with ledger.write() as s:
        row = s.get(Publication, row_id)
        record_post(row, published, problem, f"{note}; {problem}" if problem and note != "ok" else (problem or note))
        s.add(row)
    return row


def _mark(ledger: Ledger, row_id: int, status: str, why: str) -> None:
    with ledger.write() as s:
        row = s.get(Publication, row_id)
        row.status, row.verification = status, why
        s.add(row)


def _claim(ctx: RunContext, key: str, article: Article, publisher: Publisher) -> tuple[Publication, bool]:
    """The row for this key, inserted (pending) if absent; True when this call inserted it.

    A post of this channel written on this target but not verified (``hold_unverified``) is the publication
    this article takes over: withdrawn, its row is reassigned to this run and article (False: not fresh, so
    ``find`` is asked first); still on the platform (no ``withdraw``), PublicationFailed: never a second post.
    """
    target = publisher.name
    with ctx.ledger.write() as s:
        row = s.exec(select(Publication).where(Publication.idempotency_key == key)).first()
        if row is not None:
            return row, False
        channel = s.get(Run, ctx.run_id).channel
        held = s.exec(select(Publication).join(Run, Run.id == Publication.run_id)
                      .where(Publication.target == target, Publication.status == PublicationStatus.PENDING,
                             Publication.verification.startswith(WRITTEN_UNVERIFIED),
                             Run.channel == channel).order_by(Publication.id)).first()
        if held is not None and not withdrawn(held):
            raise PublicationFailed(f"publication {held.id} of run {held.run_id} is on {target} at {held.url} but was never "
                                    f"verified ({held.verification}); not publishing a second post: make that URL "
                                    "answer, or delete the post (the next run then sees it gone)")
        if held is not None:
            was = f"taken over from run {held.run_id} (article {held.article_id}): {held.verification}"
            held.run_id, held.article_id, held.idempotency_key = ctx.run_id, article.id, key
            held.content_hash, held.verification, held.url, held.remote_id = article.content_hash, was, None, None
            s.add(held)
            return held, False
        row = Publication(run_id=ctx.run_id, article_id=article.id, idempotency_key=key,
                          target=target, content_hash=article.content_hash)
        s.add(row)
    return row, True


def budget_for(publish: PublishConfig) -> AttemptBudget:
    """The run's budget of failed platform requests, from ``[publish]``."""
    return AttemptBudget(publish.max_failed_attempts, publish.unavailable_after_s)


def _publisher(ctx: RunContext) -> Publisher:
    """The configured publisher, drawing on the run's budget of failed platform requests."""
    publisher = get_publisher(ctx.settings.publish, ctx.settings.base_dir)
    if isinstance(publisher, RemotePublisher) or is_async(publisher):
        if ctx.platform_budget is None:
            ctx.platform_budget = budget_for(ctx.settings.publish)
        publisher.budget = ctx.platform_budget
    if is_async(publisher):
        publisher.ledger = ctx.ledger
    return publisher


def is_async(publisher: Publisher) -> bool:
    """A platform whose publish call only starts a task (WeChat): driven step by step through ``advance``."""
    return bool(getattr(publisher, "asynchronous", False))


def verifier(publish: PublishConfig, publisher: Publisher, digest: str) -> Callable[[Published], str | None]:
    return lambda published: verify_published(publish, publisher, published, digest)


def _publish_async(ctx: RunContext, publisher: Any, row: Publication, article: Article) -> dict[str, Any]:
    """pending → submitted → verified | failed, as far as this run's polling budget goes.

    Still ``submitted`` (or a submit whose answer was lost) at the end of the
    budget ends the run as ``submitted`` (exit 9): not published, so no fact and
    no registration, and the next run's reconciliation resumes polling it.
    """
    budget = ctx.settings.publish.wechat.poll_budget_s
    row = publisher.advance(row.id, article, poll_budget_s=budget,
                            verify=verifier(ctx.settings.publish, publisher, article.content_hash))
    if row.status == PublicationStatus.VERIFIED:
        return _result(row, publish_id=row.publish_id)
    if row.status == PublicationStatus.UNVERIFIED:
        raise CapabilityError(f"published to {row.url} but it could not be verified: {row.verification}")
    if row.status in ("failed", "removed"):
        raise PublicationFailed(f"{publisher.name} did not publish the article: {row.verification}")
    if row.status == PublicationStatus.SUBMITTED:
        raise PublicationSubmitted(f"{publisher.name}: publish task {row.publish_id} accepted (已提交发布) but "
                                   f"not published after {budget:g}s of polling; the next run resumes polling it "
                                   f"(publication {row.id})")
    raise PublicationSubmitted(f"{publisher.name}: the submit's outcome is unknown ({row.verification}); the next run "
                               f"looks for the article before submitting again (publication {row.id})")


def _find_earlier(publisher: Publisher, key: str, slug: str, digest: str) -> Published | None:
    """What an earlier attempt with this key left on the platform; CapabilityError if the slug holds other content."""
    try:
        found = publisher.find(key=key, slug=slug)
    except LookupUnsupported as exc:
        if getattr(publisher, "dedupes_creates", False):
            return None  # sending again with the same key is safe: the platform answers the first post
        raise CapabilityError(f"{exc}; not publishing twice") from None
    except (OSError, httpx.HTTPError) as exc:
        raise CapabilityError(f"cannot tell whether an earlier attempt reached {publisher.name} "
                              f"({type(exc).__name__}: {exc}); not publishing twice, try again later") from None
    if found is None:
        return None
    problem = same_content(found, key, digest)
    if problem:
        raise CapabilityError(f"an earlier publication with this key does not match this article: {problem}")
    return found


def _metadata(ctx: RunContext, row_id: int, article: Article, publisher: Publisher) -> dict[str, Any]:
    """What a publisher that shows dates and tags gets from the ledger: the publication's time, the topic's keywords.

    Keywords are what a CSV backlog's ``keywords`` column added to the topic's angle (after " — ").
    """
    if not getattr(publisher, "takes_metadata", False):
        return {}
    with ctx.ledger.read() as s:
        row = s.get(Publication, row_id)
        topic = s.get(Topic, article.topic_id) if article.topic_id else None
    tags: list[str] = []
    if topic is not None and topic.angle and " — " in topic.angle:
        keywords = topic.angle.rsplit(" — ", 1)[1]
        tags = [t.strip() for t in re.split(r"[,，;；、]", keywords) if t.strip()][:5]
    return {"published_at": row.created_at, "tags": tags}


def _call_platform(ctx: RunContext, publisher: Publisher, row_id: int, key: str, slug: str, article: Article) -> Published:
    """The one external side effect, with its failure written to the row before the error goes up."""
    try:
        return publisher.publish(key=key, slug=slug, title=article.title, body_markdown=article.body,
                                 content_hash=article.content_hash, **_metadata(ctx, row_id, article, publisher))
    except PublishOutcomeUnknown as exc:
        # The platform may hold the post: stay pending so the next attempt or recovery asks find().
        _mark(ctx.ledger, row_id, "pending", f"outcome unknown: {exc}")
        raise
    except (RunInterrupted, DeadlineExceeded) as exc:
        # Abandoned mid-call: the platform may hold the post. Pending, so recovery asks find() first.
        _mark(ctx.ledger, row_id, "pending", f"outcome unknown: the call to {publisher.name} was abandoned ({exc})")
        raise
    except PlatformUnavailableError as exc:
        # A create may have gone out before the budget ran out: pending, for the next run's recovery.
        _mark(ctx.ledger, row_id, "pending", f"outcome unknown: {exc}")
        raise
    except ConfigError as exc:
        _mark(ctx.ledger, row_id, "failed", f"ConfigError: {exc}")
        raise
    except CapabilityError as exc:
        _mark(ctx.ledger, row_id, "failed", f"CapabilityError: {exc}")
        raise
    except (OSError, httpx.HTTPError) as exc:
        _mark(ctx.ledger, row_id, "failed", f"{type(exc).__name__}: {exc}")
        raise CapabilityError(f"publishing to {publisher.name} failed: {exc}") from None


def _hold_for_review(ctx: RunContext, article: Article) -> None:
    """Stop before the platform: a dry run writes its preview; a manual review also waits for an editor."""
    from pipeline.publishing import review

    if ctx.dry_run:
        preview = review.write_preview(ctx.settings, ctx.run_id, article)
        raise DryRunDone(f"dry run: nothing published; the would-be post is at {preview.as_uri()}")
    row = review.request(ctx.settings, ctx.ledger, ctx.run_id, article)
    raise AwaitingReview(f"awaiting review: '{article.title}' is not published until an editor approves it; "
                         f"preview: {Path(row.preview).as_uri()}; then: pipeline review approve {ctx.run_id} "
                         f"(or reject {ctx.run_id} --reason …)")


def publish_article(ctx: RunContext, article_id: int) -> dict[str, Any]:
    """The ``publish`` capability's work (see the module docstring)."""
    with ctx.ledger.read() as s:
        article = s.get(Article, article_id)
        done = s.exec(select(Publication).where(Publication.run_id == ctx.run_id, Publication.status == PublicationStatus.VERIFIED)).first()
    if done is not None:
        return _result(done, replayed=True, note="this run has already published; not publishing again")
    with ctx.ledger.read() as s:
        started = s.exec(select(Publication).where(Publication.run_id == ctx.run_id,
                                                   Publication.status.in_((PublicationStatus.PENDING, PublicationStatus.SUBMITTED)),
                                                   Publication.article_id != article_id)).first()
    if article is None or article.run_id != ctx.run_id:
        raise CapabilityError(f"no article {article_id} in this run; pass the article_id returned by humanize")
    if article.kind != "humanized":
        raise CapabilityError(f"article {article_id} is a draft; call humanize and publish the article_id it returns")
    threshold = ctx.settings.humanize.pass_mark(article.language)
    # Below the threshold only an editor's approval publishes it (humanize held it for review).
    if (article.score is None or article.score < threshold) and ctx.approved_by is None:
        raise CapabilityError(f"article {article_id} scored {article.score}, below the threshold {threshold}; "
                              f"call humanize again with the draft's article_id {article.parent_id}")

    if ctx.dry_run or (ctx.settings.publish.review == "manual" and ctx.approved_by is None):
        _hold_for_review(ctx, article)
    key, publisher = idempotency_key(ctx.run_id, article), _publisher(ctx)
    if started is not None and is_async(publisher):
        # One article per run: a second one must not start a second publish task.
        raise CapabilityError(f"publication {started.id} (article {started.article_id}) of this run is still "
                              f"{started.status}; publish that article_id, not another one")
    slug = slug_for(article, key)
    row, fresh = _claim(ctx, key, article, publisher)
    if row.status == PublicationStatus.VERIFIED:
        return _result(row, replayed=True)
    if row.content_hash != article.content_hash:
        raise CapabilityError(f"idempotency key {key[:12]}… was recorded for different content "
                              f"({row.content_hash[:12]}… ≠ {article.content_hash[:12]}…); not publishing")
    if is_async(publisher):
        return _publish_async(ctx, publisher, row, article)

    # A row that was already there may have reached the platform before its process died: look first.
    published = None if fresh else _find_earlier(publisher, key, slug, article.content_hash)
    note = "ok (adopted the post an earlier attempt made)" if published else "ok"
    if published is None:
        published = _call_platform(ctx, publisher, row.id, key, slug, article)

    problem = verify_published(ctx.settings.publish, publisher, published, article.content_hash)
    if problem:
        held = hold_unverified(ctx.ledger, publisher, row.id, published, problem)
        gone = "; withdrawn: nothing of it is live" if withdrawn(held) else ""
        raise CapabilityError(f"published to {published.url} but it could not be verified: {problem}{gone}; "
                              f"publication {held.id} is reused by the next attempt")
    row = _settle(ctx.ledger, row.id, published, None, note)
    return _result(row, adopted=True) if note != "ok" else _result(row)
