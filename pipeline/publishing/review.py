"""An editor's approval gate: with ``[publish] review = "manual"`` nothing is published without a human yes.

A run goes topic → draft → humanize as usual; its ``publish`` call then
writes a preview of the would-be post (``[publish] preview_dir/<run>/``),
records a ``reviews`` row (``pending``) and ends the run ``awaiting_review``
(exit 8, alerted with the preview's path). Then:

* ``pipeline review approve RUN --by NAME`` marks it ``approved`` (who and when,
  in one conditional UPDATE: only a ``pending`` review can be approved), then
  runs publish, register and report for that run, recorded as the run's own
  executions (``call_id`` ``review:<approver>``), marks the review complete and
  the run ``done``. It holds the channel's lock throughout, so it never overlaps
  a run of the channel or a second approval; a second approver gets exit 75
  while the first works, and "already approved" afterwards: one publication.
  A crash after the approval is recorded leaves an approved, incomplete review:
  approving again finishes it (publish finds what it may already have posted);
* ``pipeline review reject RUN --reason TEXT`` closes it: the run is
  ``rejected`` and nothing is published.

``pipeline run --dry-run`` stops at the same point, writes the same preview
and ends ``dry_run`` (exit 0) without a review row or any platform call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlmodel import select

from ..config import RunSettings
from ..errors import ConfigError, ExitCode, PipelineError
from ..ledger.models import Article, Registration, Report, Review, Run
from ..ledger.utc import utcnow
from ..ledger.writer import Ledger
from ..states import ReviewStatus, RunStatus
from ..views.status import ReviewView, review_of, reviews

CALL_PREFIX = "review:"


def write_preview(settings: RunSettings, run_id: str, article: Article) -> Path:
    """The would-be post as a page of a one-post local site under ``preview_dir/<run>``; returns the page's path."""
    from ..text.content import slugify
    from ..text.disclosure import Disclosure
    from .publishers.local import LocalSitePublisher

    directory = settings.path(settings.publish.preview_dir) / run_id
    site = LocalSitePublisher(directory, directory.as_uri(), title=f"Preview · run {run_id}",
                              author=settings.publish.local.author, disclosure=Disclosure.of(settings.publish))
    slug = slugify(article.title, f"a{article.id}")
    published = site.publish(key=f"preview-{run_id}", slug=slug, title=article.title, body_markdown=article.body,
                             content_hash=article.content_hash)
    return Path(published.local_check)


def request(settings: RunSettings, ledger: Ledger, run_id: str, article: Article) -> Review:
    """The run's review, created (pending, with a preview) if it has none."""
    with ledger.read() as s:
        found = s.exec(select(Review).where(Review.run_id == run_id)).first()
    if found is not None:
        return found
    preview = write_preview(settings, run_id, article)
    with ledger.write() as s:
        found = s.exec(select(Review).where(Review.run_id == run_id)).first()
        if found is not None:
            return found
        row = Review(run_id=run_id, article_id=article.id, preview=str(preview))
        s.add(row)
    return row


def pending(ledger: Ledger, channel: str | None = None, *, all_states: bool = False) -> list[ReviewView]:
    """Reviews waiting for a decision (or approved and not finished), oldest first; every review with ``all_states``."""
    return reviews(ledger, channel, all_states=all_states)


def show(ledger: Ledger, run_id: str) -> ReviewView:
    found = review_of(ledger, run_id)
    if found is None:
        raise ConfigError(f"no review for run {run_id!r} (pipeline review list shows them)")
    return found


def reviewer(explicit: str | None) -> str:
    name = (explicit or os.environ.get("PIPELINE_REVIEWER") or os.environ.get("USER") or "").strip()
    if not name:
        raise ConfigError("who is deciding? pass --by NAME (or set PIPELINE_REVIEWER)")
    return name


def reject(settings: RunSettings, ledger: Ledger, run_id: str, by: str, reason: str) -> ReviewView:
    """Close a pending review: nothing is published; the run is recorded ``rejected``."""
    if not reason.strip():
        raise ConfigError("reject needs --reason: the ledger keeps why")
    run = _run(ledger, run_id)
    from ..ledger.locks import channel_lock

    with channel_lock(settings.ledger_url, settings.state_dir, run.channel):
        now = utcnow()
        with ledger.write() as s:
            done = s.exec(update(Review).where(Review.run_id == run_id, Review.status == ReviewStatus.PENDING)
                          .values(status=ReviewStatus.REJECTED, decided_by=by, decided_at=now, reason=reason)).rowcount
            if done:
                row = s.get(Run, run_id)
                row.status, row.exit_code = "rejected", 0
                row.error = f"rejected by {by}: {reason}"
                row.finished_at = now
                s.add(row)
        if not done:
            current = show(ledger, run_id)
            raise ConfigError(f"run {run_id}: the review is {current.status}"
                              + (f" (by {current.decided_by} at {current.decided_at})" if current.decided_by else "")
                              + "; only a pending review can be rejected")
    return show(ledger, run_id)


def _run(ledger: Ledger, run_id: str) -> Run:
    with ledger.read() as s:
        run = s.get(Run, run_id)
    if run is None:
        raise ConfigError(f"no run {run_id!r}")
    return run


def approve(settings: RunSettings, ledger: Ledger, run_id: str, by: str) -> tuple[ReviewView, bool]:
    """Approve and publish, register and report the run's article, exactly once. Returns (review, did_it_now).

    ``settings`` must be the run's channel's (``Config.run_settings``). Raises ChannelLocked (exit 75) while a run of
    the channel or another approval holds its lock, ConfigError (exit 2) for a rejected or
    unknown review, and what publish raises when the platform fails (the review stays
    approved and incomplete: approve again to finish).
    """
    from ..ledger.locks import channel_lock

    run = _run(ledger, run_id)
    with channel_lock(settings.ledger_url, settings.state_dir, run.channel):
        now = utcnow()
        with ledger.write() as s:
            review = s.exec(select(Review).where(Review.run_id == run_id)).first()
            if review is None:
                raise ConfigError(f"no review for run {run_id!r} (pipeline review list shows them)")
            # Conditional: a second approver (another host on a shared database) cannot approve again.
            s.exec(update(Review).where(Review.id == review.id, Review.status == ReviewStatus.PENDING)
                   .values(status=ReviewStatus.APPROVED, decided_by=by, decided_at=now))
        current = show(ledger, run_id)
        if current.status == ReviewStatus.REJECTED:
            raise ConfigError(f"run {run_id} was rejected by {current.decided_by} at {current.decided_at}: "
                              f"{current.reason}")
        if current.completed:
            return current, False
        _complete(settings, ledger, run_id, current.decided_by or by)
    return show(ledger, run_id), True


def _complete(settings: RunSettings, ledger: Ledger, run_id: str, by: str) -> None:
    """publish → register → report for an approved run, each recorded as the run's execution; then done."""
    from ..model.messages import ToolCall
    from ..tools.catalog import toolbox
    from ..tools.prompts import Prompts
    from ..tools.toolbox import RunContext

    tools = toolbox()
    ctx = RunContext(run_id, settings, ledger, llm=None, prompts=Prompts(), approved_by=by)
    with ledger.read() as s:
        review = s.exec(select(Review).where(Review.run_id == run_id)).one()
        reported = s.exec(select(Report).where(Report.run_id == run_id)).first() is not None

    def call(name: str, **args: Any) -> dict[str, Any]:
        result = tools.execute(ctx, ToolCall(f"{CALL_PREFIX}{by}", name, json.dumps(args)))
        if not result.ok:
            raise ReviewStepFailed(f"run {run_id}: {name} failed after approval: {result.payload.get('error')}; "
                                   "the review stays approved: `pipeline review approve` again finishes it")
        return result.payload

    published = call("publish", article_id=review.article_id)
    with ledger.read() as s:
        registered = s.exec(select(Registration).where(
            Registration.publication_id == published["publication_id"])).first() is not None
    if not registered:
        call("register", publication_id=published["publication_id"])
    if not reported:
        call("report")
    with ledger.write() as s:
        row = s.exec(select(Review).where(Review.run_id == run_id)).one()
        row.completed_at = utcnow()
        s.add(row)
        run = s.get(Run, run_id)
        run.status, run.exit_code, run.error, run.finished_at = RunStatus.DONE, int(ExitCode.DONE), None, utcnow()
        s.add(run)


class ReviewStepFailed(PipelineError):
    """A step after approval failed; the review stays approved and incomplete (exit 4)."""

    exit_code = ExitCode.INCOMPLETE
