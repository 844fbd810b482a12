"""Settling what an earlier run left behind: first with the platforms, then in the ledger.

Runs end early: killed, stopped, out of time, or with their model gone. Before the next run of a
channel starts its agent, ``reconcile`` settles what earlier runs left, in this order.

**Recovery: the platforms.** A publication stays ``pending`` (or ``submitted`` on an asynchronous
platform) while its outcome is unknown: the process died, or a create timed out and could not be
found. Once its run is over, ``recover_pending`` asks the platform and writes down the answer;
``recheck_published`` notices an asynchronous platform taking an article down after success.

**Reconciliation: the ledger.** A run that ends between ``publish`` and ``register`` (killed: ``crashed``;
stopped: ``interrupted``; its provider down, a deadline passed, the model gave
up or lied: ``states.UNFINISHED``) leaves a post that is live and ``verified``
in the ledger but has no registration number, so the register (台账) is
incomplete. Crash recovery (``recover_pending``) can also turn a pending row
into a verified one long after its run ended. The next run of
the channel, before its agent starts, calls ``reconcile``:

1. ``recover_pending`` settles pending publications with the platform;
2. every verified, unregistered publication of an unfinished run of this
   channel gets its registration number, in one
   transaction together with a ``register`` execution recorded under the
   original run (``call_id`` ``reconcile:<run doing it>``), so the original
   run's facts say it was registered and by whom;
3. after that commit, an alert says it happened, and the execution is marked
   ``alerted``.

Exactly once: the registration is unique per publication (a constraint) and
is written with its execution in one transaction, so a reconciliation killed
at any point either registered the publication or did not; the next one
registers only what is still unregistered. An alert lost to a kill between
the commit and the send is sent by the next reconciliation (the execution is
still not ``alerted``): at least once, never silently dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlmodel import select

from ..config import RunSettings
from ..errors import ConfigError, PipelineError, PlatformUnavailableError
from ..ledger.models import Article, Execution, Publication, Registration, Run
from ..ledger.utc import aware, utcnow
from ..ledger.writer import Ledger
from ..runtime.alerts import Alerter
from ..states import UNFINISHED, PublicationStatus, RunStatus
from .publish import (
    RECOVERED,
    budget_for,
    hold_unverified,
    is_async,
    record_post,
    slug_for,
    verifier,
    verify_published,
    withdrawn,
)
from .publishers import LookupUnsupported, Publisher, get_publisher, same_content
from .publishers.remote import RemotePublisher

log = logging.getLogger(__name__)


def _orphans(ledger: Ledger, cutoff: datetime, channel: str | None) -> list[tuple[Publication, Article]]:
    """Pending or submitted publications whose run is over, or has been "running" since before ``cutoff``."""
    query = (select(Publication, Run, Article)
             .join(Run, Run.id == Publication.run_id)
             .join(Article, Article.id == Publication.article_id)
             .where(Publication.status.in_((PublicationStatus.PENDING, PublicationStatus.SUBMITTED)))
             .order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        rows = s.exec(query).all()
    return [(pub, art) for pub, run, art in rows if run.status != RunStatus.RUNNING or aware(run.started_at) < cutoff]


def _resume_async(settings: RunSettings, ledger: Ledger, pub: Publication, article: Article, publisher: Any) -> bool:
    """Take an asynchronous platform's row one step further (one status poll); True when it reached an end state.

    A row whose submit never started is left for its own run to publish: only a
    ``publish`` call may start one, and its run is over; it becomes ``failed``
    so that the ledger does not keep an unsent publication pending forever.
    """
    if pub.status == PublicationStatus.PENDING and pub.submit_started_at is None:
        with ledger.write() as s:
            row = s.get(Publication, pub.id)
            if row.status != PublicationStatus.PENDING or row.submit_started_at is not None:
                return False
            row.status, row.verification = "failed", f"{RECOVERED}: never submitted, so never published"
            s.add(row)
        return True
    publisher.ledger = ledger
    row = publisher.advance(pub.id, article, poll_budget_s=0,
                            verify=verifier(settings.publish, publisher, pub.content_hash))
    return row.status not in ("pending", "submitted")


UNKNOWN = "unknown"  # the platform may hold the post and cannot be asked: said so, never "not published"


def _recover_one(settings: RunSettings, ledger: Ledger, pub: Publication, article: Article,
                 publisher: Publisher) -> bool | str:
    """Ask the platform about one pending row and write down the answer; False if it was settled meanwhile.

    Returns ``UNKNOWN`` when the platform cannot be asked (no lookup): the row then says so.
    """
    if is_async(publisher):
        return _resume_async(settings, ledger, pub, article, publisher)
    if pub.status != PublicationStatus.PENDING:
        return False
    try:
        found = publisher.find(key=pub.idempotency_key, slug=slug_for(article, pub.idempotency_key))
    except LookupUnsupported as exc:
        with ledger.write() as s:
            row = s.get(Publication, pub.id)
            if row.status != PublicationStatus.PENDING:
                return False
            row.status = UNKNOWN
            row.verification = f"{RECOVERED}: outcome unknown: {exc}; it may be live without a registration"
            s.add(row)
        return UNKNOWN
    if found is None and withdrawn(pub):
        return False  # written, not verified and taken down: the channel's next publish reuses this row
    mismatch = same_content(found, pub.idempotency_key, pub.content_hash) if found else None
    problem = (None if found is None or mismatch
               else verify_published(settings.publish, publisher, found, pub.content_hash))
    if found is not None and not mismatch and problem:
        # On the platform and still not verified: taken down where it can be, kept pending either way, so the
        # channel's next publish reuses it instead of posting a second one (never left live as "unverified").
        hold_unverified(ledger, publisher, pub.id, found, f"{RECOVERED}; {problem}")
        return False  # still pending: not settled
    with ledger.write() as s:
        row = s.get(Publication, pub.id)
        if row.status != PublicationStatus.PENDING:  # someone else settled it first
            return False
        if found is None or mismatch:
            row.status = PublicationStatus.FAILED
            row.verification = f"{RECOVERED}: " + (mismatch or f"not on {pub.target}, so it was never published")
        else:
            record_post(row, found, None, RECOVERED)
        s.add(row)
    return True



def recover_pending(settings: RunSettings, ledger: Ledger, *, channel: str | None = None,
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
    same target at different sites, and only ``settings``' channel is known here.
    A platform without a lookup cannot answer: the row becomes ``unknown`` and
    ``on_unknown(publication, detail)`` is called (the runner alerts).
    """
    minutes = settings.publish.recover_after_min if older_than_min is None else older_than_min
    settled, publishers, down = 0, {}, set()
    for pub, article in _orphans(ledger, utcnow() - timedelta(minutes=minutes), channel):
        if pub.target in down:
            continue
        try:
            if pub.target not in publishers:
                publishers[pub.target] = get_publisher(settings.publish, settings.base_dir, pub.target)
                if isinstance(publishers[pub.target], RemotePublisher) or is_async(publishers[pub.target]):
                    # a dead host must not stall the run's start
                    publishers[pub.target].budget = budget_for(settings.publish)
            outcome = _recover_one(settings, ledger, pub, article, publishers[pub.target])
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


def recheck_published(settings: RunSettings, ledger: Ledger, *, channel: str | None = None) -> list[Publication]:
    """Asynchronous platforms can take an article down after success: mark such rows ``removed``; returns them.

    Asks once per run about each publication verified in the last
    ``[publish.wechat] recheck_days`` that has a publish task id. A platform
    that cannot answer now is asked again next run.
    """
    days = settings.publish.wechat.recheck_days
    if not days:
        return []
    query = (select(Publication).join(Run, Run.id == Publication.run_id)
             .where(Publication.status == PublicationStatus.VERIFIED, Publication.publish_id.is_not(None),
                    Publication.verified_at >= utcnow() - timedelta(days=days)).order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        rows = s.exec(query).all()
    removed, publishers = [], {}
    for row in rows:
        try:
            if row.target not in publishers:
                publishers[row.target] = get_publisher(settings.publish, settings.base_dir, row.target)
                publishers[row.target].budget = budget_for(settings.publish)
                publishers[row.target].ledger = ledger
            publisher = publishers[row.target]
            if not hasattr(publisher, "recheck"):
                continue
            after = publisher.recheck(row)
        except (PipelineError, OSError, httpx.HTTPError) as exc:
            log.warning("publication %s (%s): recheck failed: %s", row.id, row.target, exc)
            continue
        if after.status == PublicationStatus.REMOVED:
            removed.append(after)
    return removed


# --- reconciliation: the ledger ------------------------------------------------------------------

CALL_PREFIX = "reconcile:"


@dataclass(frozen=True)
class Reconciled:
    publication_id: int
    run_id: str
    run_status: str
    url: str | None
    registration_no: str

    def line(self) -> str:
        return (f"publication {self.publication_id} of {self.run_status} run {self.run_id} ({self.url}) "
                f"registered as {self.registration_no}")


def unregistered(ledger: Ledger, channel: str | None = None) -> list[tuple[Publication, Run]]:
    """Verified publications of runs that ended unfinished (``states.UNFINISHED``) and have no registration yet."""
    query = (select(Publication, Run).join(Run, Run.id == Publication.run_id)
             .outerjoin(Registration, Registration.publication_id == Publication.id)
             .where(Publication.status == PublicationStatus.VERIFIED, Run.status.in_(UNFINISHED), Registration.id.is_(None))
             .order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        return list(s.exec(query).all())


def _number_publication(settings: RunSettings, ledger: Ledger, pub_id: int,
                        by_run: str) -> tuple[Reconciled, int] | None:
    """Register one publication with its execution record, in one transaction; None if it was done meanwhile."""
    from .numbers import assign, registration_day

    day = registration_day(settings.registration)
    with ledger.write() as s:
        pub = s.get(Publication, pub_id)
        run = s.get(Run, pub.run_id)
        taken = s.exec(select(Registration).where(Registration.publication_id == pub_id)).first()
        if taken is not None or pub.status != PublicationStatus.VERIFIED:
            return None
        reg = assign(s, settings.registration, pub, day)
        result = {"registration_no": reg.registration_no, "publication_id": pub.id, "url": pub.url,
                  "reconciled_by": by_run, "run_status": run.status, "alerted": False}
        now = utcnow()
        ex = Execution(run_id=pub.run_id, call_id=f"{CALL_PREFIX}{by_run}", capability="register",
                       arguments_json=json.dumps({"publication_id": pub.id}), ok=True,
                       result_json=json.dumps(result, ensure_ascii=False), started_at=now, finished_at=now)
        s.add(ex)
        s.flush()
        return Reconciled(pub.id, pub.run_id, run.status, pub.url, reg.registration_no), ex.id


def _alert_and_mark(ledger: Ledger, alerter: Alerter, channel: str, by_run: str | None, execution_id: int,
                    done: Reconciled) -> None:
    alerter.alert(channel, done.run_id, "reconciled", f"{done.line()} by run {by_run}" if by_run else done.line())
    with ledger.write() as s:
        ex = s.get(Execution, execution_id)
        result = json.loads(ex.result_json or "{}")
        result["alerted"] = True
        ex.result_json = json.dumps(result, ensure_ascii=False)
        s.add(ex)


def reconciliations(ledger: Ledger, channel: str | None = None, since: datetime | None = None,
                    until: datetime | None = None) -> list[dict[str, Any]]:
    """Registrations made by reconciliation (newest last), with what they completed."""
    query = (select(Execution, Run).join(Run, Run.id == Execution.run_id)
             .where(Execution.capability == "register", Execution.call_id.like(f"{CALL_PREFIX}%"), Execution.ok == True)  # noqa: E712
             .order_by(Execution.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    if since is not None:
        query = query.where(Execution.started_at >= since)
    if until is not None:
        query = query.where(Execution.started_at < until)
    with ledger.read() as s:
        rows = s.exec(query).all()
    out = []
    for ex, run in rows:
        result = json.loads(ex.result_json or "{}")
        out.append({"execution_id": ex.id, "run_id": run.id, "channel": run.channel, "run_status": run.status,
                    "publication_id": result.get("publication_id"), "url": result.get("url"),
                    "registration_no": result.get("registration_no"), "reconciled_by": result.get("reconciled_by"),
                    "alerted": bool(result.get("alerted")), "at": ex.started_at.isoformat()})
    return out


def reconcile(settings: RunSettings, ledger: Ledger, alerter: Alerter, *, channel: str, run_id: str | None = None,
              older_than_min: float | None = None) -> list[Reconciled]:
    """Settle pending publications, then register what unfinished runs of ``channel`` published. Returns what it registered.

    Raises ConfigError when the platform refuses the credentials during recovery: the operator must hear it.
    """

    recover_pending(settings, ledger, channel=channel, older_than_min=older_than_min,
                    on_unknown=lambda pub, detail: alerter.alert(channel, pub.run_id, "publication outcome unknown", detail))
    # An article the platform took down after success is no longer published: say so loudly.
    for pub in recheck_published(settings, ledger, channel=channel):
        log.error("publication %s (%s) was removed from %s: %s", pub.id, pub.url, pub.target, pub.verification)
        alerter.alert(channel, pub.run_id, "removed", f"publication {pub.id} ({pub.url}) on {pub.target}: "
                                                      f"{pub.verification}")
    # Alerts a killed reconciliation registered but never sent.
    for row in reconciliations(ledger, channel):
        if not row["alerted"]:
            done = Reconciled(row["publication_id"], row["run_id"], row["run_status"], row["url"], row["registration_no"])
            _alert_and_mark(ledger, alerter, channel, row["reconciled_by"], row["execution_id"], done)
    registered = []
    for pub, _run in unregistered(ledger, channel):
        made = _number_publication(settings, ledger, pub.id, run_id or "reconciliation")
        if made is None:
            continue
        done, execution_id = made
        log.warning("reconciled: %s", done.line())
        _alert_and_mark(ledger, alerter, channel, run_id, execution_id, done)
        registered.append(done)
    return registered
