"""A tick ends on business state: an attempt that published is settled, never run again.

A tick (a channel's scheduled firing) may be delivered many times: a redelivery after a
worker died, the daemon's re-queue of a lapsed lease, a duplicate message. Before a delivery
runs the pipeline, holding the channel's lock, ``settle_before_run`` looks at the tick:

* ``done``: nothing to do; the no-op is recorded (``tick_events``) and TickAlreadyRun raised;
* ``claimed`` by a run that died (we hold the lock, so its process is gone): reconciliation
  first settles its pending posts with the platform and registers what it published; then, if
  any run of this tick has a publication that is (or may be) live, the tick is finished with
  that run as its outcome — a missing report is written for it — and TickAlreadyRun raised:
  a second run would post a second article;
* otherwise the caller claims the tick (again) and runs it.

While a run holds its tick, ``LeaseKeeper`` renews the claim's lease every lease/3 seconds
on the ledger's clock. A lapsed lease with the channel lock free means the worker died; the
leading daemon queues the tick again (``Ledger.resend_due``) and the delivery settles it here.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime

from sqlmodel import select

from ..config import RunSettings
from ..errors import TickAlreadyRun
from ..ledger.models import Execution, Publication, Registration, Report
from ..ledger.utc import utcnow
from ..ledger.writer import Ledger
from ..runtime.alerts import Alerter
from ..states import PublicationStatus

log = logging.getLogger(__name__)

# A publication in one of these states is on the platform, or may be: running the tick again
# would put a second article there. "verified" is settled (registered, reported); the others are
# left to recovery (submitted: the platform still works on it) or to the operator (unknown, unverified).
MAY_BE_LIVE = ("verified", "submitted", "unverified", "unknown")
CALL_PREFIX = "settle:"


def settle_before_run(settings: RunSettings, ledger: Ledger, alerter: Alerter, channel: str, tick: datetime) -> None:
    """Settle what earlier deliveries of ``tick`` did; raises TickAlreadyRun when nothing is left to run.

    Call holding the channel's lock, after ``Ledger.mark_crashed``.
    """
    from ..publishing.settle import reconcile

    row = ledger.tick_row(channel, tick)
    if row is None or row.state == "queued":
        return
    if row.state == "done":
        ledger.tick_event(channel, tick, "noop", f"already done: {row.outcome or f'run {row.run_id}'}", row.run_id)
        raise TickAlreadyRun(f"skipped: the {tick.isoformat()} tick of channel {channel} already ran ({row.run_id})")
    # Claimed by a dead run: what it left pending is asked about, what it published is registered.
    assert row.id is not None
    reconcile(settings, ledger, alerter, channel=channel, run_id=None, older_than_min=0)
    runs = ledger.runs_of_tick(row.id)
    with ledger.read() as s:
        pubs = s.exec(select(Publication).where(Publication.run_id.in_(runs),  # type: ignore[attr-defined]
                                                Publication.status.in_(MAY_BE_LIVE))  # type: ignore[attr-defined]
                      .order_by(Publication.id)).all()  # type: ignore[arg-type]
    if not pubs:
        return
    pub = next((p for p in pubs if p.status == PublicationStatus.VERIFIED), pubs[0])
    with ledger.read() as s:
        reg = s.exec(select(Registration).where(Registration.publication_id == pub.id)).first()
    if pub.status == PublicationStatus.VERIFIED:
        _report(settings, ledger, pub.run_id, tick)
    outcome = (f"run {pub.run_id} published {pub.url or '(no URL yet)'} (publication {pub.id}, {pub.status}"
               f"{', registered as ' + reg.registration_no if reg else ''}); its process died; not run again")
    ledger.settle_tick(row.id, pub.run_id, outcome)
    alerter.alert(channel, pub.run_id, "tick settled", f"the {tick.isoformat()} tick: {outcome}")
    raise TickAlreadyRun(f"settled: the {tick.isoformat()} tick of channel {channel}: {outcome}")


def _report(settings: RunSettings, ledger: Ledger, run_id: str, tick: datetime) -> None:
    """The report the dead run did not write, with a ``report`` execution under that run (as reconcile registers)."""
    from ..views.reports import deliver, render_run, run_summary

    with ledger.read() as s:
        if s.exec(select(Report.id).where(Report.run_id == run_id)).first() is not None:
            return
    body = render_run(run_summary(ledger, run_id))
    now = utcnow()
    with ledger.write() as s:
        report = Report(run_id=run_id, body=body)
        s.add(report)
        s.flush()
        s.add(Execution(run_id=run_id, call_id=f"{CALL_PREFIX}{tick.isoformat()}", capability="report",
                        arguments_json="{}", ok=True, started_at=now, finished_at=now,
                        result_json=json.dumps({"report_id": report.id, "settled": True})))
    deliver(settings.report, settings.base_dir, f"run-{run_id}", body)


class LeaseKeeper:
    """Renews a run's claim on its tick every ``lease_s / 3`` seconds until stopped (a thread of the run's process)."""

    def __init__(self, ledger: Ledger, tick_id: int, run_id: str, lease_s: float) -> None:
        self.ledger, self.tick_id, self.run_id, self.lease_s = ledger, tick_id, run_id, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"lease tick {tick_id}")

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.ledger.renew_lease(self.tick_id, self.run_id, self.lease_s):
                    return  # the tick is no longer this run's claim (finished)
            except Exception as exc:  # the ledger is away: the channel lock still excludes others
                log.warning("tick %s: lease not renewed: %s", self.tick_id, exc)
