"""The ledger's tables: what the system *did*, one table per kind of record.

Prompts, tool calls and tool results live in separate tables so each can be
queried on its own:

    runs ─┬─ turns          every message sent to or received from the model
          ├─ executions     every capability call: arguments, result or error, ok
          ├─ model_calls    every model call a capability made itself (draft, humanize, brainstorm)
          ├─ topics / articles / publications / registrations / reports
          │                 the business records capabilities create
          ├─ topic_sources  which sources a topic is written from (sources: each text stored once)
          └─ source_facts   the facts the research step took from them, each with its span
          ├─ ticks          scheduled firings, claimed once before their run starts
          │   └─ tick_events   every delivery of a tick and what was decided
          ├─ claims         what the model *said* it did, with the guard's verdict
          └─ guard_events   each nudge or failure the guard decided on
    provider_capabilities   what a model behind an api_base was probed to honour (pipeline.model.probe)

Only an ``executions`` row with ``ok = 1`` is a fact.

The schema is owned by the Alembic revisions in ``pipeline/ledger/migrations/versions``:
a change here needs a new revision there (``tests/test_migrations.py`` fails otherwise).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, DateTime, Index, Text, UniqueConstraint, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine
from sqlmodel import Field, SQLModel

from .utc import aware, utcnow


class UTCDateTime(TypeDecorator[datetime]):
    """Every time in the ledger: aware UTC in Python, ``timestamptz`` on PostgreSQL, ISO text with ``+00:00`` on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True
    # SQLAlchemy's own SQLite DATETIME drops the offset; this format keeps it (pipeline.ledger.utc.SQLITE_FORMAT).
    _SQLITE = sqlite.DATETIME(
        timezone=True,
        storage_format="%(year)04d-%(month)02d-%(day)02dT%(hour)02d:%(minute)02d:%(second)02d.%(microsecond)06d+00:00",
        regexp=r"(\d+)-(\d+)-(\d+)[T ](\d+):(\d+):(\d+)(?:\.(\d+))?")

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return self._SQLITE if dialect.name == "sqlite" else dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else aware(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else aware(value)


def Time(**kw: Any) -> Any:  # noqa: N802  (capitalised: it reads as a column type in the models below)
    """A time column (``UTCDateTime``); keyword arguments as for ``Field``."""
    return Field(sa_type=UTCDateTime, **kw)


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_channel_started_at", "channel", "started_at"),)
    id: str = Field(primary_key=True)
    channel: str = "default"
    model: str
    started_at: datetime = Time(default_factory=utcnow)
    finished_at: datetime | None = Time(default=None)
    # running | done | hallucination | incomplete | provider_unavailable | platform_unavailable | submitted
    # | awaiting_review | rejected | dry_run | error
    # | interrupted | crashed
    status: str = "running"
    exit_code: int | None = None
    nudges: int = 0
    guard_enabled: bool = True
    error: str | None = Field(default=None, sa_column=Column(Text))
    # Model turns after done_when held and the report was recorded (the closing message): None when it never did.
    turns_after_done: int | None = None


class Turn(SQLModel, table=True):
    __tablename__ = "turns"
    # For `pipeline stats` and /metrics: per-model numbers read from these small indexes, never
    # from the rows themselves (a turn's content is kilobytes of prompt and tool results).
    __table_args__ = (
        Index("ix_turns_assistant_stats", "requested_model", "latency_ms", "served_model", "prompt_tokens",
              "completion_tokens", "created_at", sqlite_where=text("role = 'assistant'"),
              postgresql_where=text("role = 'assistant'")),
        Index("ix_turns_prose", "requested_model", "served_model", "created_at",
              sqlite_where=text("role = 'assistant' AND tool_calls_json IS NULL"),
              postgresql_where=text("role = 'assistant' AND tool_calls_json IS NULL")),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    seq: int
    # system | user | assistant | tool | nudge
    role: str
    content: str | None = Field(default=None, sa_column=Column(Text))
    tool_calls_json: str | None = Field(default=None, sa_column=Column(Text))
    tool_call_id: str | None = None
    requested_model: str | None = None
    served_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    created_at: datetime = Time(default_factory=utcnow)


class Execution(SQLModel, table=True):
    __tablename__ = "executions"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    turn_id: int | None = Field(default=None, foreign_key="turns.id")
    call_id: str | None = None
    capability: str = Field(index=True)
    arguments_json: str = Field(sa_column=Column(Text, nullable=False))
    # NULL while running (a crash leaves it NULL: never a fact), then 1 or 0.
    ok: bool | None = None
    result_json: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    started_at: datetime = Time(default_factory=utcnow)
    finished_at: datetime | None = Time(default=None)


class ModelCall(SQLModel, table=True):
    """A model call made by a capability (a side call), with its tokens and latency.

    The agent's own calls are its assistant turns; these are the rest, so that a run's model time and
    tokens are the sum of both (``ledger show`` totals, ``pipeline stats``).
    """

    __tablename__ = "model_calls"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    # The step it served: the capability's execution (set when that row is committed with it).
    execution_id: int | None = Field(default=None, foreign_key="executions.id", index=True)
    capability: str
    requested_model: str
    served_model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    finish_reason: str | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))  # the call failed (its latency: until it did)
    created_at: datetime = Time(default_factory=utcnow)
    # What it was sent and what it answered (revision 0019; NULL before it, and for a scoring pass, which reads
    # the article the row's step stored)
    messages_json: str | None = Field(default=None, sa_column=Column(Text))
    reply: str | None = Field(default=None, sa_column=Column(Text))


class Topic(SQLModel, table=True):
    __tablename__ = "topics"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    title: str
    normalized: str = Field(index=True)
    angle: str | None = None
    source: str
    created_at: datetime = Time(default_factory=utcnow)


class Article(SQLModel, table=True):
    __tablename__ = "articles"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    topic_id: int | None = Field(default=None, foreign_key="topics.id")
    parent_id: int | None = Field(default=None, foreign_key="articles.id")
    kind: str  # draft | humanized
    title: str
    body: str = Field(sa_column=Column(Text, nullable=False))
    language: str
    content_hash: str
    score: float | None = None
    score_components_json: str | None = Field(default=None, sa_column=Column(Text))
    scorer: str | None = None  # which scorer measured `score` (pipeline.score.scoring: method, model sha256); NULL: the heuristic before it
    score_paragraphs_json: str | None = Field(default=None, sa_column=Column(Text))
    # The plan it was written from (drafts), the completeness checks it passed, and (humanized) each
    # rewritten paragraph's score before and after.
    outline_id: int | None = None  # outlines.id (no FK constraint: SQLite would rebuild the table to add one)
    checks_json: str | None = Field(default=None, sa_column=Column(Text))
    paragraphs_json: str | None = Field(default=None, sa_column=Column(Text))
    # The grounding check (pipeline.sources.grounding): each statement with a specific, the source span that
    # supports it or "unsupported", and what was repaired or removed (revision 0020).
    grounding_json: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Time(default_factory=utcnow)


class Source(SQLModel, table=True):
    """A text an article may be written from, stored once: the same location with the same bytes is one row."""

    __tablename__ = "sources"
    __table_args__ = (UniqueConstraint("location", "sha256"),)
    id: int | None = Field(default=None, primary_key=True)
    kind: str  # notes (the operator's own files: first person allowed) | web (a fetched page)
    location: str  # an absolute path or an http(s) URL
    url: str | None = None  # where a reader can follow it (the page; None for a local file)
    title: str
    language: str
    sha256: str = Field(index=True)  # of the extracted text
    text: str = Field(sa_column=Column(Text, nullable=False))
    fetched_at: datetime = Time(default_factory=utcnow)


class TopicSource(SQLModel, table=True):
    __tablename__ = "topic_sources"
    __table_args__ = (UniqueConstraint("topic_id", "source_id"),)
    id: int | None = Field(default=None, primary_key=True)
    topic_id: int = Field(foreign_key="topics.id", index=True)
    source_id: int = Field(foreign_key="sources.id")
    position: int  # the source's number in the article's Sources list (1-based)


class SourceFact(SQLModel, table=True):
    """One fact the research step took from a source: a short statement and the span of the source it came from."""

    __tablename__ = "source_facts"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    topic_id: int = Field(foreign_key="topics.id", index=True)
    source_id: int = Field(foreign_key="sources.id")
    statement: str = Field(sa_column=Column(Text, nullable=False))
    start: int  # the span in the source's text: text[start:end]
    end: int
    created_at: datetime = Time(default_factory=utcnow)


class Outline(SQLModel, table=True):
    """The draft step's plan: title, one-line thesis, 3-6 sections each with the point it makes."""

    __tablename__ = "outlines"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    topic_id: int | None = Field(default=None, foreign_key="topics.id")
    language: str
    title: str
    thesis: str = Field(sa_column=Column(Text, nullable=False))
    sections_json: str = Field(sa_column=Column(Text, nullable=False))  # [{"heading": …, "point": …}, …]
    constrained: bool = False  # produced under a JSON schema (response_format), not parsed from free text
    created_at: datetime = Time(default_factory=utcnow)


class Publication(SQLModel, table=True):
    __tablename__ = "publications"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    article_id: int = Field(foreign_key="articles.id")
    # Written *before* the external call; a repeat with the same key is a replay.
    idempotency_key: str = Field(unique=True)
    target: str
    content_hash: str
    url: str | None = None
    remote_id: str | None = None  # the platform's own id for the post
    # pending | submitted | verified | unverified | failed | removed
    # ("submitted": an asynchronous platform accepted a publish task, publish_id, that has not finished;
    # "removed": verified once, then deleted or blocked on the platform)
    status: str = "pending"
    # Asynchronous platforms (WeChat): each step's result, written as soon as the platform answers,
    # so a crash resumes from the last step instead of repeating it (see pipeline/publishing/publishers/wechat.py).
    cover_id: str | None = None  # the cover's permanent material media_id
    draft_id: str | None = None  # the draft's media_id
    submit_started_at: datetime | None = Time(default=None)  # set just before the submit call: a task may exist from here on
    publish_id: str | None = None  # the publish task's id, once the platform accepted it
    submitted_at: datetime | None = Time(default=None)
    verification: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Time(default_factory=utcnow)
    verified_at: datetime | None = Time(default=None)


class Review(SQLModel, table=True):
    """An editor's decision on a run's article ([publish] review = "manual"): publish happens only on approval."""

    __tablename__ = "reviews"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", unique=True)
    article_id: int = Field(foreign_key="articles.id")
    # pending | approved | rejected
    status: str = Field(default="pending", index=True)
    preview: str | None = Field(default=None, sa_column=Column(Text))  # the would-be post, rendered locally
    requested_at: datetime = Time(default_factory=utcnow)
    decided_by: str | None = None
    decided_at: datetime | None = Time(default=None)
    reason: str | None = Field(default=None, sa_column=Column(Text))
    # Set once publish, register and report have run for the approved article.
    completed_at: datetime | None = Time(default=None)


class PlatformToken(SQLModel, table=True):
    """An access token shared by every process and worker that calls one platform account."""

    __tablename__ = "platform_tokens"
    # "<platform>:<account>", e.g. "wechat:wx1234…" (the appid, not a secret)
    name: str = Field(primary_key=True)
    token: str = Field(sa_column=Column(Text, nullable=False))
    expires_at: datetime = Time()
    fetched_at: datetime = Time(default_factory=utcnow)


class Registration(SQLModel, table=True):
    __tablename__ = "registrations"
    __table_args__ = (UniqueConstraint("day", "seq"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    publication_id: int = Field(foreign_key="publications.id", unique=True)
    registration_no: str = Field(unique=True)
    day: str  # YYYYMMDD in the configured timezone
    seq: int
    created_at: datetime = Time(default_factory=utcnow)


class Report(SQLModel, table=True):
    __tablename__ = "reports"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    body: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Time(default_factory=utcnow)


class Claim(SQLModel, table=True):
    __tablename__ = "claims"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    turn_id: int | None = Field(default=None, foreign_key="turns.id")
    capability: str
    text: str = Field(sa_column=Column(Text, nullable=False))
    value: str | None = None
    status: str  # verified | unbacked | mismatch
    created_at: datetime = Time(default_factory=utcnow)


class Tick(SQLModel, table=True):
    """One scheduled firing of a channel, claimed before its run starts: at most one completed run each.

    A duplicated message, a redelivery after a worker died, or two schedulers firing the same
    tick all meet this row. ``claimed`` with a dead run is claimed again (``attempts`` + 1) by
    whoever next holds the channel's lock; ``done`` is final.
    """

    __tablename__ = "ticks"
    __table_args__ = (UniqueConstraint("channel", "scheduled_for"),)
    id: int | None = Field(default=None, primary_key=True)
    channel: str
    scheduled_for: datetime = Time()
    state: str = "claimed"  # queued | claimed | done
    attempts: int = 1  # claims so far (0 while queued)
    run_id: str | None = Field(default=None, foreign_key="runs.id", index=True)  # the claimant; when done, the outcome
    claimed_by: str | None = None  # host:pid of the process that claimed it last
    claimed_at: datetime = Time(default_factory=utcnow)
    finished_at: datetime | None = Time(default=None)
    # The claim holds while its run renews this (on the ledger's clock); lapsed with the channel lock free,
    # the claimer is dead: the tick is queued again and its dead run settled (pipeline/ticks.py).
    lease_until: datetime | None = Time(default=None)
    queued_at: datetime | None = Time(default=None)  # last sent to the broker (the daemon's re-queue reads it)
    outcome: str | None = Field(default=None, sa_column=Column(Text))  # how it ended, in words


class TickEvent(SQLModel, table=True):
    """What happened to a tick, one row per delivery and decision: queued, busy, claimed, reclaimed, settled, noop, done."""

    __tablename__ = "tick_events"
    id: int | None = Field(default=None, primary_key=True)
    tick_id: int = Field(foreign_key="ticks.id", index=True)
    run_id: str | None = Field(default=None, foreign_key="runs.id")  # the run it concerns (claimed: the claimant)
    kind: str
    detail: str | None = Field(default=None, sa_column=Column(Text))
    actor: str | None = None  # host:pid that recorded it
    at: datetime = Time(default_factory=utcnow)


class Daemon(SQLModel, table=True):
    """One ``pipeline daemon`` process: when it started, its last heartbeat, when it stopped cleanly.

    ``pipeline status`` reads the newest row: a daemon is alive while its beats are fresh (a kill -9
    leaves ``stopped_at`` NULL and the beats stop), and ticks before ``started_at`` are not overdue.
    In the ledger, not a file, so a standby or another host sees the same answer.
    """

    __tablename__ = "daemons"
    id: str = Field(primary_key=True)  # host:pid:random
    host: str
    pid: int
    started_at: datetime = Time(default_factory=utcnow, index=True)
    beat_at: datetime = Time(default_factory=utcnow)
    stopped_at: datetime | None = Time(default=None)


class GuardEvent(SQLModel, table=True):
    __tablename__ = "guard_events"
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    turn_id: int | None = Field(default=None, foreign_key="turns.id")
    # hallucination | incomplete | text_tool_call ; action: nudge | fail | off
    kind: str
    action: str
    nudge_no: int = 0
    message: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Time(default_factory=utcnow)


class ProviderCapability(SQLModel, table=True):
    """What one model behind one endpoint honours, as probed (``pipeline.model.probe``); None: not known."""

    __tablename__ = "provider_capabilities"
    model: str = Field(primary_key=True)
    api_base: str = Field(primary_key=True, default="")  # "" for the provider's default endpoint
    json_schema: bool | None = None
    tools: bool | None = None
    usage: bool | None = None
    served_model: str | None = None  # what the endpoint said it served: a change means a new provider
    error: str | None = Field(default=None, sa_column=Column(Text))  # the probe failed: asked again next time
    probed_at: datetime = Time(default_factory=utcnow)
