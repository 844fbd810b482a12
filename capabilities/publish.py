"""publish: put a humanized article on the configured platform, once, and verify it.

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
agree again; the runner calls it at start.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any

import httpx
from sqlmodel import select

from pipeline.config import Config
from pipeline.content import slugify
from pipeline.errors import (AwaitingReview, CapabilityError, ConfigError, DeadlineExceeded, DryRunDone, PipelineError,
                             PlatformUnavailableError, PublicationFailed, PublicationSubmitted, RunInterrupted)
from pipeline.ledger import Ledger
from pipeline.models import Article, Publication, Run, Topic, utcnow
from pipeline.publishers import (LookupUnsupported, Published, Publisher, PublishOutcomeUnknown, get_publisher,
                                 same_content)
from pipeline.publishers.remote import AttemptBudget, RemotePublisher
from pipeline.tools import RunContext, capability
from pipeline.verify import check_url, host_allowed

log = logging.getLogger(__name__)

RECOVERED = "recovered after crash"


def _result(p: Publication, **extra: Any) -> dict:
    return {"publication_id": p.id, "url": p.url, "verified": p.status == "verified", "target": p.target, **extra}


def _key(run_id: str, article: Article) -> str:
    return hashlib.sha256(f"{run_id}:{article.id}:{article.content_hash}".encode()).hexdigest()


def _slug(article: Article, key: str) -> str:
    return slugify(article.title, f"a{article.id}-{key[:8]}")


def _verify(cfg: Config, publisher: Publisher, published: Published, digest: str) -> str | None:
    """None when the publication is verified, else the reason it is not."""
    allowed = cfg.publish.allowed_domains
    if not host_allowed(published.url, allowed):
        return f"{published.url} is not on [publish] allowed_domains {allowed}"
    problem = publisher.verify_local(published, digest)
    if problem:
        return problem
    result = check_url(published.url, allowed, cfg.publish.verify_timeout_s)
    if result.ok:
        return None
    if published.local_check and "ConnectError" in result.detail:
        # The local site is not being served right now; the file check above is the proof.
        return None
    return result.detail


def _settle(ledger: Ledger, row_id: int, published: Published, problem: str | None, note: str) -> Publication:
    """Write the outcome of a publication that reached the platform."""
    with ledger.write() as s:
        row = s.get(Publication, row_id)
        row.url, row.remote_id = published.url, published.remote_id
        row.status = "unverified" if problem else "verified"
        row.verification = f"{note}; {problem}" if problem and note != "ok" else (problem or note)
        row.verified_at = None if problem else utcnow()
        s.add(row)
    return row


def _mark(ledger: Ledger, row_id: int, status: str, why: str) -> None:
    with ledger.write() as s:
        row = s.get(Publication, row_id)
        row.status, row.verification = status, why
        s.add(row)


def _claim(ctx: RunContext, key: str, article: Article, target: str) -> tuple[Publication, bool]:
    """The row for this key, inserted (pending) if absent; True when this call inserted it."""
    with ctx.ledger.write() as s:
        row = s.exec(select(Publication).where(Publication.idempotency_key == key)).first()
        if row is not None:
            return row, False
        row = Publication(run_id=ctx.run_id, article_id=article.id, idempotency_key=key,
                          target=target, content_hash=article.content_hash)
        s.add(row)
    return row, True


def budget_for(cfg: Config) -> AttemptBudget:
    return AttemptBudget(cfg.publish.max_failed_attempts, cfg.publish.unavailable_after_s)


def _publisher(ctx: RunContext) -> Publisher:
    """The configured publisher, drawing on the run's budget of failed platform requests."""
    publisher = get_publisher(ctx.cfg)
    if isinstance(publisher, RemotePublisher) or _is_async(publisher):
        if ctx.platform_budget is None:
            ctx.platform_budget = budget_for(ctx.cfg)
        publisher.budget = ctx.platform_budget
    if _is_async(publisher):
        publisher.ledger = ctx.ledger
    return publisher


def _is_async(publisher: Publisher) -> bool:
    """A platform whose publish call only starts a task (WeChat): driven step by step through ``advance``."""
    return bool(getattr(publisher, "asynchronous", False))


def _verifier(cfg: Config, publisher: Publisher, digest: str) -> Callable[[Published], str | None]:
    return lambda published: _verify(cfg, publisher, published, digest)


def _publish_async(ctx: RunContext, publisher: Any, row: Publication, article: Article) -> dict:
    """pending → submitted → verified | failed, as far as this run's polling budget goes.

    Still ``submitted`` (or a submit whose answer was lost) at the end of the
    budget ends the run as ``submitted`` (exit 9): not published, so no fact and
    no registration, and the next run's reconciliation resumes polling it.
    """
    budget = ctx.cfg.publish.wechat.poll_budget_s
    row = publisher.advance(row.id, article, poll_budget_s=budget,
                            verify=_verifier(ctx.cfg, publisher, article.content_hash))
    if row.status == "verified":
        return _result(row, publish_id=row.publish_id)
    if row.status == "unverified":
        raise CapabilityError(f"published to {row.url} but it could not be verified: {row.verification}")
    if row.status in ("failed", "removed"):
        raise PublicationFailed(f"{publisher.name} did not publish the article: {row.verification}")
    if row.status == "submitted":
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


def _metadata(ctx: RunContext, row_id: int, article: Article, publisher: Publisher) -> dict:
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
    from pipeline import review

    if ctx.dry_run:
        preview = review.write_preview(ctx.cfg, ctx.run_id, article)
        raise DryRunDone(f"dry run: nothing published; the would-be post is at {preview.as_uri()}")
    row = review.request(ctx.cfg, ctx.ledger, ctx.run_id, article)
    raise AwaitingReview(f"awaiting review: '{article.title}' is not published until an editor approves it; "
                         f"preview: {Path(row.preview).as_uri()}; then: pipeline review approve {ctx.run_id} "
                         f"(or reject {ctx.run_id} --reason …)")


@capability
def publish(ctx: RunContext, article_id: Annotated[int, "The article_id returned by humanize."]) -> dict:
    """Publish a humanized article to the configured platform and verify its URL. Returns publication_id and url."""
    with ctx.ledger.read() as s:
        article = s.get(Article, article_id)
        done = s.exec(select(Publication).where(Publication.run_id == ctx.run_id, Publication.status == "verified")).first()
    if done is not None:
        return _result(done, replayed=True, note="this run has already published; not publishing again")
    with ctx.ledger.read() as s:
        started = s.exec(select(Publication).where(Publication.run_id == ctx.run_id,
                                                   Publication.status.in_(("pending", "submitted")),
                                                   Publication.article_id != article_id)).first()
    if article is None or article.run_id != ctx.run_id:
        raise CapabilityError(f"no article {article_id} in this run; pass the article_id returned by humanize")
    if article.kind != "humanized":
        raise CapabilityError(f"article {article_id} is a draft; call humanize and publish the article_id it returns")
    threshold = ctx.cfg.humanize.threshold
    if article.score is None or article.score < threshold:
        raise CapabilityError(f"article {article_id} scored {article.score}, below the threshold {threshold}; "
                              f"call humanize again with the draft's article_id {article.parent_id}")

    if ctx.dry_run or (ctx.cfg.publish.review == "manual" and ctx.approved_by is None):
        _hold_for_review(ctx, article)
    key, publisher = _key(ctx.run_id, article), _publisher(ctx)
    if started is not None and _is_async(publisher):
        # One article per run: a second one must not start a second publish task.
        raise CapabilityError(f"publication {started.id} (article {started.article_id}) of this run is still "
                              f"{started.status}; publish that article_id, not another one")
    slug = _slug(article, key)
    row, fresh = _claim(ctx, key, article, publisher.name)
    if row.status == "verified":
        return _result(row, replayed=True)
    if row.content_hash != article.content_hash:
        raise CapabilityError(f"idempotency key {key[:12]}… was recorded for different content "
                              f"({row.content_hash[:12]}… ≠ {article.content_hash[:12]}…); not publishing")
    if _is_async(publisher):
        return _publish_async(ctx, publisher, row, article)

    # A row that was already there may have reached the platform before its process died: look first.
    published = None if fresh else _find_earlier(publisher, key, slug, article.content_hash)
    note = "ok (adopted the post an earlier attempt made)" if published else "ok"
    if published is None:
        published = _call_platform(ctx, publisher, row.id, key, slug, article)

    problem = _verify(ctx.cfg, publisher, published, article.content_hash)
    row = _settle(ctx.ledger, row.id, published, problem, note)
    if problem:
        raise CapabilityError(f"published to {published.url} but it could not be verified: {problem}")
    return _result(row, adopted=True) if note != "ok" else _result(row)


# --- crash recovery ----------------------------------------------------------


def _aware(dt: datetime) -> datetime:
    """SQLite hands datetimes back without a zone; the ledger writes UTC."""
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _orphans(ledger: Ledger, cutoff: datetime, channel: str | None) -> list[tuple[Publication, Article]]:
    """Pending or submitted publications whose run is over, or has been "running" since before ``cutoff``."""
    query = (select(Publication, Run, Article)
             .join(Run, Run.id == Publication.run_id)
             .join(Article, Article.id == Publication.article_id)
             .where(Publication.status.in_(("pending", "submitted")))
             .order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        rows = s.exec(query).all()
    return [(pub, art) for pub, run, art in rows if run.status != "running" or _aware(run.started_at) < cutoff]


def _resume_async(cfg: Config, ledger: Ledger, pub: Publication, article: Article, publisher: Any) -> bool:
    """Take an asynchronous platform's row one step further (one status poll); True when it reached an end state.

    A row whose submit never started is left for its own run to publish: only a
    ``publish`` call may start one, and its run is over; it becomes ``failed``
    so that the ledger does not keep an unsent publication pending forever.
    """
    if pub.status == "pending" and pub.submit_started_at is None:
        with ledger.write() as s:
            row = s.get(Publication, pub.id)
            if row.status != "pending" or row.submit_started_at is not None:
                return False
            row.status, row.verification = "failed", f"{RECOVERED}: never submitted, so never published"
            s.add(row)
        return True
    publisher.ledger = ledger
    row = publisher.advance(pub.id, article, poll_budget_s=0, verify=_verifier(cfg, publisher, pub.content_hash))
    return row.status not in ("pending", "submitted")


UNKNOWN = "unknown"  # the platform may hold the post and cannot be asked: said so, never "not published"


def _recover_one(cfg: Config, ledger: Ledger, pub: Publication, article: Article, publisher: Publisher) -> bool | str:
    """Ask the platform about one pending row and write down the answer; False if it was settled meanwhile.

    Returns ``UNKNOWN`` when the platform cannot be asked (no lookup): the row then says so.
    """
    if _is_async(publisher):
        return _resume_async(cfg, ledger, pub, article, publisher)
    if pub.status != "pending":
        return False
    try:
        found = publisher.find(key=pub.idempotency_key, slug=_slug(article, pub.idempotency_key))
    except LookupUnsupported as exc:
        with ledger.write() as s:
            row = s.get(Publication, pub.id)
            if row.status != "pending":
                return False
            row.status = UNKNOWN
            row.verification = f"{RECOVERED}: outcome unknown: {exc}; it may be live without a registration"
            s.add(row)
        return UNKNOWN
    mismatch = same_content(found, pub.idempotency_key, pub.content_hash) if found else None
    problem = None if found is None or mismatch else _verify(cfg, publisher, found, pub.content_hash)
    with ledger.write() as s:
        row = s.get(Publication, pub.id)
        if row.status != "pending":  # someone else settled it first
            return False
        if found is None or mismatch:
            row.status = "failed"
            row.verification = f"{RECOVERED}: " + (mismatch or f"not on {pub.target}, so it was never published")
        else:
            row.url, row.remote_id = found.url, found.remote_id
            row.status = "unverified" if problem else "verified"
            row.verification = f"{RECOVERED}; {problem}" if problem else RECOVERED
            row.verified_at = None if problem else utcnow()
        s.add(row)
    return True


def recover_pending(cfg: Config, ledger: Ledger, *, channel: str | None = None,
                    older_than_min: float | None = None,
                    on_unknown: Callable[[Publication, str], None] | None = None) -> int:
    """Settle publications left ``pending`` by runs that are no longer running; returns how many were settled.

    A run counts as no longer running when its status is anything but
    ``running``, or it has been ``running`` for more than ``older_than_min``
    minutes (default ``[publish] recover_after_min``). Each row's publisher
    (by the row's own target) is asked ``find``: a post with the row's key is
    verified and the row marked ``verified`` ("recovered after crash"), or
    ``unverified`` if its URL does not check out; no post means ``failed``.
    A row the platform cannot answer for now is left pending for next time;
    a platform that refuses the credentials raises ConfigError (exit 2).

    ``channel`` limits recovery to that channel's runs: channels may point the
    same target at different sites, and only ``cfg``'s channel is known here.
    A platform without a lookup cannot answer: the row becomes ``unknown`` and
    ``on_unknown(publication, detail)`` is called (the runner alerts).
    """
    minutes = cfg.publish.recover_after_min if older_than_min is None else older_than_min
    settled, publishers, down = 0, {}, set()
    for pub, article in _orphans(ledger, utcnow() - timedelta(minutes=minutes), channel):
        if pub.target in down:
            continue
        try:
            if pub.target not in publishers:
                publishers[pub.target] = get_publisher(cfg, pub.target)
                if isinstance(publishers[pub.target], RemotePublisher) or _is_async(publishers[pub.target]):
                    # a dead host must not stall the run's start
                    publishers[pub.target].budget = budget_for(cfg)
            outcome = _recover_one(cfg, ledger, pub, article, publishers[pub.target])
            settled += bool(outcome)
            if outcome == UNKNOWN and on_unknown is not None:
                on_unknown(pub, f"publication {pub.id} (run {pub.run_id}, {pub.target}): the outcome of the "
                                "interrupted publish cannot be known; the platform may hold the post — check it by hand")
        except PlatformUnavailableError as exc:
            down.add(pub.target)
            log.warning("publication %s (%s) left pending: %s", pub.id, pub.target, exc)
        except ConfigError as exc:
            if pub.target not in publishers:  # this config cannot build that target: not ours to settle
                log.warning("publication %s (%s) left pending: %s", pub.id, pub.target, exc)
                continue
            raise  # the platform refused the credentials: the operator must hear it, not a log line
        except (PipelineError, OSError, httpx.HTTPError) as exc:
            log.warning("publication %s (%s) left pending: %s", pub.id, pub.target, exc)
    return settled


def recheck_published(cfg: Config, ledger: Ledger, *, channel: str | None = None) -> list[Publication]:
    """Asynchronous platforms can take an article down after success: mark such rows ``removed``; returns them.

    Asks once per run about each publication verified in the last
    ``[publish.wechat] recheck_days`` that has a publish task id. A platform
    that cannot answer now is asked again next run.
    """
    days = cfg.publish.wechat.recheck_days
    if not days:
        return []
    query = (select(Publication).join(Run, Run.id == Publication.run_id)
             .where(Publication.status == "verified", Publication.publish_id.is_not(None),
                    Publication.verified_at >= utcnow() - timedelta(days=days)).order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        rows = s.exec(query).all()
    removed, publishers = [], {}
    for row in rows:
        try:
            if row.target not in publishers:
                publishers[row.target] = get_publisher(cfg, row.target)
                publishers[row.target].budget = budget_for(cfg)
                publishers[row.target].ledger = ledger
            publisher = publishers[row.target]
            if not hasattr(publisher, "recheck"):
                continue
            after = publisher.recheck(row)
        except (PipelineError, OSError, httpx.HTTPError) as exc:
            log.warning("publication %s (%s): recheck failed: %s", row.id, row.target, exc)
            continue
        if after.status == "removed":
            removed.append(after)
    return removed
