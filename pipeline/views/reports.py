"""Reports built from ledger rows only: one run's report and the daily summary.

Nothing here reads model text, so a report can never repeat a hallucination.
The summaries are frozen dataclasses (``as_dict()`` is the ``--json`` shape),
read with plain SQL through ``pipeline.ledger.reader``: ``pipeline report`` starts
without SQLAlchemy, and a run in progress reads the same way through its
Ledger's engine. Sinks: the terminal (the CLI renders the summary), a
Markdown file under ``[report] markdown_dir``, and a chat webhook in Slack or
Feishu/Lark/DingTalk/WeCom bot format.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from ..ledger.reader import reader_for
from ..states import UNFINISHED
from ..text.files import atomic_write

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import ReportConfig

# As in pipeline.publishing.settle (a test keeps them equal): the call id of the register executions reconciliation
# records. Not imported from there: it needs SQLAlchemy.
RECONCILE_CALL_PREFIX = "reconcile:"


@dataclass(frozen=True)
class RunSummary:
    """What the ledger holds for one run: the facts a report may state."""

    run_id: str
    channel: str | None
    status: str | None
    topic: str | None
    title: str | None
    score: float | None
    url: str | None
    registration_no: str | None
    nudges: int
    hallucinations_caught: int
    # What the score can say about this run's writer (pipeline.score.validity), from the article's scorer column and
    # the run's model: "validated" | "unvalidated" | "unknown", the families its scorer was validated on, and the
    # note printed beside the number ("unvalidated for <model>: ...") when the writer is not one of them.
    scorer: str | None = None
    writer: str | None = None
    score_validity: str | None = None
    validated_on: tuple[str, ...] = ()
    score_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _ChannelRow:
    """A publication row of some channel; ``status`` lists them per channel, so without the channel."""

    def as_dict(self, channel: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = asdict(self)  # type: ignore[call-overload]  # the subclasses are dataclasses
        if not channel:
            del data["channel"]
        return data


@dataclass(frozen=True)
class Recovered(_ChannelRow):
    """A publication of an unfinished run that reconciliation registered."""

    publication_id: int | None
    run_id: str
    channel: str
    run_status: str
    url: str | None
    registration_no: str | None
    reconciled_by: str | None


@dataclass(frozen=True)
class Unregistered(_ChannelRow):
    """A verified publication of an unfinished run that has no registration yet (the next run registers it)."""

    publication_id: int
    run_id: str
    channel: str
    run_status: str
    url: str | None


@dataclass(frozen=True)
class PublishedRef:
    run_id: str
    url: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Failure:
    run_id: str
    channel: str
    status: str
    exit_code: int | None
    error: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# A run's outcome as the operator reads it (SQL over ``runs``): an article held for an editor because its score
# stayed under the pass mark is recorded ``incomplete`` with a review waiting; it is "held", not a failure.
OUTCOME_SQL = ("CASE WHEN runs.status = 'incomplete' AND EXISTS (SELECT 1 FROM reviews v WHERE v.run_id = runs.id "
               "AND v.status IN ('pending', 'approved')) THEN 'held' ELSE runs.status END")
# Outcomes that are decisions or waits, never failures.
NOT_FAILURES = ("done", "running", "held", "awaiting_review", "rejected", "dry_run")


@dataclass(frozen=True)
class DailySummary:
    date: str
    timezone: str
    runs: int
    by_status: dict[str, int]
    publications: list[PublishedRef]
    registrations: list[str]
    hallucinations_caught: int
    # Registered that day for runs that crashed or were interrupted after publishing (pipeline.publishing.settle).
    reconciled: list[Recovered]
    awaiting_registration: list[Unregistered]
    failures: list[Failure]
    # Articles waiting for an editor: a review requested (manual), or a score under the pass mark.
    held: list[Failure] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "held": [h.as_dict() for h in self.held],
            "date": self.date, "timezone": self.timezone, "runs": self.runs, "by_status": dict(self.by_status),
            "publications": [p.as_dict() for p in self.publications],
            "registrations": list(self.registrations),
            "hallucinations_caught": self.hallucinations_caught,
            "reconciled": [r.as_dict() for r in self.reconciled],
            "awaiting_registration": [r.as_dict() for r in self.awaiting_registration],
            "failures": [f.as_dict() for f in self.failures],
        }


def _in(prefix: str, values: list[Any]) -> tuple[str, dict[str, Any]]:
    """``IN (:p0, :p1, …)`` and its parameters."""
    return ", ".join(f":{prefix}{i}" for i in range(len(values))), {f"{prefix}{i}": v for i, v in enumerate(values)}


def run_summary(ledger: Any, run_id: str) -> RunSummary:
    """``ledger``: a Ledger (a run in progress) or a LedgerReader (a read command)."""
    db = reader_for(ledger)
    run = db.get_run(run_id)
    topic = db.scalar("SELECT title FROM topics WHERE run_id = :r ORDER BY id LIMIT 1", r=run_id)
    pubs = db.rows("SELECT article_id, url FROM publications WHERE run_id = :r AND status = 'verified' ORDER BY id LIMIT 1",
                   r=run_id)
    pub = pubs[0] if pubs else None
    if pub is not None:
        articles = db.rows("SELECT * FROM articles WHERE id = :a", a=pub.article_id)
    else:
        articles = db.rows("SELECT * FROM articles WHERE run_id = :r AND kind = 'humanized' "
                           "ORDER BY score DESC LIMIT 1", r=run_id)
    article = articles[0] if articles else None
    writer = getattr(run, "model", None) if run else None
    valid = None
    if article is not None and article.score is not None:
        from ..score.validity import validity

        # getattr: a ledger from before revision 0018 has no scorer column
        valid = validity(getattr(article, "scorer", None), getattr(article, "language", None), writer)
    registration = db.scalar("SELECT registration_no FROM registrations WHERE run_id = :r ORDER BY id LIMIT 1", r=run_id)
    caught = db.scalar("SELECT count(*) FROM claims WHERE run_id = :r AND status != 'verified'", r=run_id)
    return RunSummary(
        run_id=run_id,
        channel=run.channel if run else None,
        status=run.status if run else None,
        topic=topic,
        title=article.title if article else None,  # a held article's too: the editor's line names it
        score=article.score if article else None,
        url=pub.url if pub else None,
        registration_no=registration,
        nudges=run.nudges if run else 0,
        hallucinations_caught=int(caught or 0),
        scorer=getattr(article, "scorer", None) if article else None,
        writer=writer,
        score_validity=valid.status if valid else None,
        validated_on=valid.validated_on if valid else (),
        score_note=valid.label if valid else "",
    )


RUN_LABELS = [("channel", "Channel"), ("topic", "Topic"), ("title", "Title"), ("score", "Humanize score"), ("url", "URL"),
              ("registration_no", "Registration"), ("nudges", "Nudges"), ("hallucinations_caught", "Hallucinations caught")]


def render_run(summary: RunSummary) -> str:
    lines = [f"# Run {summary.run_id}", ""]
    for key, label in RUN_LABELS:
        value = getattr(summary, key)
        shown = value if value not in (None, "") else "—"
        if key == "score" and value is not None and summary.score_note:
            shown = f"{value} ({summary.score_note})"  # never a bare human-likeness for a writer it cannot judge
        lines.append(f"- {label}: {shown}")
    return "\n".join(lines) + "\n"


def reconciled_registrations(ledger: Any, channel: str | None = None, since: datetime | None = None,
                             until: datetime | None = None) -> list[Recovered]:
    """Registrations made by reconciliation (oldest first), with what they completed."""
    db = reader_for(ledger)
    where, params = "", {"prefix": f"{RECONCILE_CALL_PREFIX}%", "ok": True}
    if channel is not None:
        where += " AND r.channel = :channel"
        params["channel"] = channel
    if since is not None:
        where += " AND e.started_at >= :since"
        params["since"] = db.time_param(since)
    if until is not None:
        where += " AND e.started_at < :until"
        params["until"] = db.time_param(until)
    out = []
    for row in db.rows("SELECT e.result_json, r.id AS run_id, r.channel, r.status AS run_status FROM executions e "
                       "JOIN runs r ON r.id = e.run_id WHERE e.capability = 'register' AND e.call_id LIKE :prefix "
                       f"AND e.ok = :ok{where} ORDER BY e.id", **params):
        result = json.loads(row.result_json or "{}")
        out.append(Recovered(result.get("publication_id"), row.run_id, row.channel, row.run_status, result.get("url"),
                             result.get("registration_no"), result.get("reconciled_by")))
    return out


def unregistered_publications(ledger: Any, channel: str | None = None) -> list[Unregistered]:
    """Verified publications of crashed, interrupted or submitted runs that have no registration yet."""
    db = reader_for(ledger)
    states, params = _in("s", [str(s) for s in UNFINISHED])
    where = ""
    if channel is not None:
        where, params["channel"] = " AND r.channel = :channel", channel
    rows = db.rows("SELECT p.id AS publication_id, r.id AS run_id, r.channel, r.status AS run_status, p.url "
                   "FROM publications p JOIN runs r ON r.id = p.run_id "
                   "LEFT OUTER JOIN registrations g ON g.publication_id = p.id "
                   f"WHERE p.status = 'verified' AND r.status IN ({states}) AND g.id IS NULL{where} ORDER BY p.id",
                   **params)
    return [Unregistered(r.publication_id, r.run_id, r.channel, r.run_status, r.url) for r in rows]


def daily_summary(ledger: Any, day: date, tz_name: str) -> DailySummary:
    """``ledger``: a Ledger or a LedgerReader."""
    db = reader_for(ledger)
    tz = ZoneInfo(tz_name)
    start = datetime.combine(day, time.min, tzinfo=tz).astimezone(timezone.utc)
    end = start + timedelta(days=1)
    runs = db.rows(f"SELECT id, channel, {OUTCOME_SQL} AS status, exit_code, error FROM runs "
                   "WHERE started_at >= :s AND started_at < :e ORDER BY started_at", s=db.time_param(start), e=db.time_param(end))
    pubs, regs, caught = [], [], 0
    if runs:
        marks, ids = _in("r", [r.id for r in runs])
        pubs = db.rows(f"SELECT run_id, url FROM publications WHERE run_id IN ({marks}) AND status = 'verified' ORDER BY id",
                       **ids)
        regs = [r[0] for r in db.tuples(f"SELECT registration_no FROM registrations WHERE run_id IN ({marks}) ORDER BY id",
                                        **ids)]
        caught = int(db.scalar(f"SELECT count(*) FROM claims WHERE run_id IN ({marks}) AND status != 'verified'", **ids) or 0)
    by_status: dict[str, int] = {}
    for r in runs:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    return DailySummary(
        date=day.isoformat(), timezone=tz_name, runs=len(runs), by_status=by_status,
        publications=[PublishedRef(p.run_id, p.url) for p in pubs],
        registrations=regs,
        hallucinations_caught=caught,
        reconciled=reconciled_registrations(db, since=start, until=end),
        awaiting_registration=unregistered_publications(db),
        failures=[Failure(r.id, r.channel, r.status, r.exit_code, r.error) for r in runs if r.status not in NOT_FAILURES],
        held=[Failure(r.id, r.channel, r.status, r.exit_code, r.error) for r in runs
              if r.status in ("held", "awaiting_review")],
    )


def render_daily(summary: DailySummary) -> str:
    s = summary
    lines = [f"# Daily report {s.date} ({s.timezone})", "",
             f"- Runs: {s.runs} " + (f"({', '.join(f'{k} {v}' for k, v in sorted(s.by_status.items()))})" if s.by_status else ""),
             f"- Publications: {len(s.publications)}",
             f"- Registrations: {len(s.registrations)}",
             f"- Recovered and registered by reconciliation: {len(s.reconciled)}",
             f"- Hallucinations caught: {s.hallucinations_caught}",
             f"- Held for review: {len(s.held)}",
             f"- Failures: {len(s.failures)}"]
    if s.publications:
        lines += ["", "## Publications", *[f"- {p.url} (run {p.run_id})" for p in s.publications]]
    if s.reconciled:
        lines += ["", "## Recovered publications", *[
            f"- {r.url} (run {r.run_id}, {r.run_status}) registered as {r.registration_no} "
            f"by run {r.reconciled_by}" for r in s.reconciled]]
    if s.awaiting_registration:
        lines += ["", "## Awaiting registration", *[
            f"- {r.url} (run {r.run_id}, {r.run_status}): verified, not registered yet; the next run of "
            f"channel {r.channel} registers it" for r in s.awaiting_registration]]
    if s.held:
        lines += ["", "## Held for review", *[f"- {h.run_id} [{h.channel}]: `pipeline review show {h.run_id}`"
                                              for h in s.held]]
    if s.failures:
        lines += ["", "## Failures", *[f"- {f.run_id} [{f.channel}] {f.status} (exit {f.exit_code}): "
                                        f"`pipeline ledger diff --run {f.run_id}`" for f in s.failures]]
    return "\n".join(lines) + "\n"


def deliver(report: ReportConfig, base_dir: Path, name: str, markdown: str, send: bool = True) -> list[str]:
    """Write the Markdown file and post to the chat webhook, as ``[report]`` says. Returns where it went.

    ``base_dir``: where a relative ``markdown_dir`` resolves (the config file's directory).
    """
    from ..config import resolve

    sent = []
    if report.markdown_dir:
        path = resolve(base_dir, report.markdown_dir) / f"{name}.md"
        atomic_write(path, markdown)
        sent.append(str(path))
    url = report.webhook_url or (os.environ.get(report.webhook_url_env, "") if report.webhook_url_env else "")
    if send and url:
        from ..runtime.alerts import post_chat  # httpx: imported only when something is sent

        if post_chat(url, report.format, markdown):
            sent.append(f"webhook ({report.format})")
    return sent

