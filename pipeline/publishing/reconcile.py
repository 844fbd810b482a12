"""Reconciliation: finish the business state an unfinished run left undone.

A run that ends between ``publish`` and ``register`` (killed: ``crashed``;
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
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import select

from ..runtime.alerts import Alerter
from ..config import Config
from ..ledger.writer import Ledger
from ..ledger.models import Execution, Publication, Registration, Run
from ..states import UNFINISHED
from ..ledger.utc import utcnow

log = logging.getLogger(__name__)

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
             .where(Publication.status == "verified", Run.status.in_(UNFINISHED), Registration.id.is_(None))
             .order_by(Publication.id))
    if channel is not None:
        query = query.where(Run.channel == channel)
    with ledger.read() as s:
        return list(s.exec(query).all())


def _register(cfg: Config, ledger: Ledger, pub_id: int, by_run: str) -> tuple[Reconciled, int] | None:
    """Register one publication with its execution record, in one transaction; None if it was done meanwhile."""
    from .numbers import assign, registration_day

    day = registration_day(cfg)
    with ledger.write() as s:
        pub = s.get(Publication, pub_id)
        run = s.get(Run, pub.run_id)
        taken = s.exec(select(Registration).where(Registration.publication_id == pub_id)).first()
        if taken is not None or pub.status != "verified":
            return None
        reg = assign(s, cfg, pub, day)
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
                    until: datetime | None = None) -> list[dict]:
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


def reconcile(cfg: Config, ledger: Ledger, alerter: Alerter, *, channel: str, run_id: str | None = None,
              older_than_min: float | None = None) -> list[Reconciled]:
    """Settle pending publications, then register what unfinished runs of ``channel`` published. Returns what it registered.

    Raises ConfigError when the platform refuses the credentials during recovery: the operator must hear it.
    """
    from .recovery import recheck_published, recover_pending

    recover_pending(cfg, ledger, channel=channel, older_than_min=older_than_min,
                    on_unknown=lambda pub, detail: alerter.alert(channel, pub.run_id, "publication outcome unknown", detail))
    # An article the platform took down after success is no longer published: say so loudly.
    for pub in recheck_published(cfg, ledger, channel=channel):
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
        made = _register(cfg, ledger, pub.id, run_id or "reconciliation")
        if made is None:
            continue
        done, execution_id = made
        log.warning("reconciled: %s", done.line())
        _alert_and_mark(ledger, alerter, channel, run_id, execution_id, done)
        registered.append(done)
    return registered
