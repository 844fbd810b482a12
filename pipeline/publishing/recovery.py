"""Crash recovery: settle what interrupted runs left on the platforms, so the ledger and they agree again.

A publication stays ``pending`` (or ``submitted`` on an asynchronous platform) while its outcome
is unknown: the process died, or a create timed out and could not be found. Once its run is
over, ``recover_pending`` asks the platform and writes down the answer; ``recheck_published``
notices an asynchronous platform taking an article down after success.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlmodel import select

from ..config import Config
from ..errors import ConfigError, PipelineError, PlatformUnavailableError
from ..ledger.writer import Ledger
from ..ledger.models import Article, Publication, Run
from ..ledger.utc import aware, utcnow
from .publishers import LookupUnsupported, Publisher, get_publisher, same_content
from .publishers.remote import RemotePublisher
from .publish import (
    RECOVERED,
    budget_for,
    is_async,
    record_post,
    slug_for,
    verifier,
    verify_published,
)

log = logging.getLogger(__name__)

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
    return [(pub, art) for pub, run, art in rows if run.status != "running" or aware(run.started_at) < cutoff]


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
    row = publisher.advance(pub.id, article, poll_budget_s=0, verify=verifier(cfg, publisher, pub.content_hash))
    return row.status not in ("pending", "submitted")


UNKNOWN = "unknown"  # the platform may hold the post and cannot be asked: said so, never "not published"


def _recover_one(cfg: Config, ledger: Ledger, pub: Publication, article: Article, publisher: Publisher) -> bool | str:
    """Ask the platform about one pending row and write down the answer; False if it was settled meanwhile.

    Returns ``UNKNOWN`` when the platform cannot be asked (no lookup): the row then says so.
    """
    if is_async(publisher):
        return _resume_async(cfg, ledger, pub, article, publisher)
    if pub.status != "pending":
        return False
    try:
        found = publisher.find(key=pub.idempotency_key, slug=slug_for(article, pub.idempotency_key))
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
    problem = None if found is None or mismatch else verify_published(cfg, publisher, found, pub.content_hash)
    with ledger.write() as s:
        row = s.get(Publication, pub.id)
        if row.status != "pending":  # someone else settled it first
            return False
        if found is None or mismatch:
            row.status = "failed"
            row.verification = f"{RECOVERED}: " + (mismatch or f"not on {pub.target}, so it was never published")
        else:
            record_post(row, found, problem, f"{RECOVERED}; {problem}" if problem else RECOVERED)
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
                if isinstance(publishers[pub.target], RemotePublisher) or is_async(publishers[pub.target]):
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
