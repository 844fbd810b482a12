"""Every state the ledger writes, named once. ``StrEnum``: a member *is* its string, in rows and JSON alike.

No SQLAlchemy here, so the read commands use the same names as the writer.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    HALLUCINATION = "hallucination"  # claims still unbacked after the nudges
    INCOMPLETE = "incomplete"  # required facts missing, no false claim
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    PLATFORM_UNAVAILABLE = "platform_unavailable"
    SUBMITTED = "submitted"  # an asynchronous platform has the publish task; the next run finishes it
    AWAITING_REVIEW = "awaiting_review"
    REJECTED = "rejected"  # by an editor
    DRY_RUN = "dry_run"
    TIMED_OUT = "timed_out"
    ENVIRONMENT = "environment"  # the host failed the run: disk full
    ERROR = "error"
    INTERRUPTED = "interrupted"  # SIGTERM/SIGINT
    CRASHED = "crashed"  # found "running" by a later run of its channel: the process died

    @property
    def operator_asked(self) -> bool:
        """A state the operator asked for (an editor's decision, a dry run): not a failure."""
        return self in (RunStatus.AWAITING_REVIEW, RunStatus.REJECTED, RunStatus.DRY_RUN)


# Runs that ended without finishing their steps, whatever stopped them: a kill, a signal, a provider or
# platform down, a deadline, the host, a bug, or the model (a hallucination, an incomplete run). A post
# such a run made is live, so reconciliation registers it for the run (the register must hold every live
# post) and alerts. Not here: "done" (register is not required when done_when leaves it out), "running",
# and the review states, whose approval publishes and registers itself.
UNFINISHED = (RunStatus.CRASHED, RunStatus.INTERRUPTED, RunStatus.SUBMITTED, RunStatus.HALLUCINATION,
              RunStatus.INCOMPLETE, RunStatus.PROVIDER_UNAVAILABLE, RunStatus.PLATFORM_UNAVAILABLE,
              RunStatus.TIMED_OUT, RunStatus.ENVIRONMENT, RunStatus.ERROR)


class PublicationStatus(StrEnum):
    PENDING = "pending"  # claimed before the platform call; outcome not known yet
    SUBMITTED = "submitted"  # an asynchronous platform accepted a publish task that has not finished
    VERIFIED = "verified"
    UNVERIFIED = "unverified"  # on the platform, but its URL did not check out
    FAILED = "failed"
    UNKNOWN = "unknown"  # the platform may hold the post and cannot be asked: never "not published"
    REMOVED = "removed"  # verified once, then deleted or blocked on the platform

    @property
    def settled(self) -> bool:
        return self not in (PublicationStatus.PENDING, PublicationStatus.SUBMITTED)


class ReviewStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class Verdict(StrEnum):
    """A claim judged against the ledger's facts."""

    VERIFIED = "verified"  # the capability succeeded (with the quoted value, if any)
    UNBACKED = "unbacked"  # the capability has no successful execution
    MISMATCH = "mismatch"  # it ran, but the quoted value is not what it recorded


class GuardKind(StrEnum):
    """What the guard found wrong with a final answer, in order of severity."""

    HALLUCINATION = "hallucination"
    TEXT_TOOL_CALL = "text_tool_call"
    INCOMPLETE = "incomplete"
    # Not about a final answer: the same call failing the same way, nudged, then failed.
    REPEATED_FAILURE = "repeated_failure"
    STUCK = "stuck"


class GuardAction(StrEnum):
    NUDGE = "nudge"
    FAIL = "fail"
    OFF = "off"  # the guard is disabled: recorded, not acted on


class Grounded(StrEnum):
    """What the grounding check (pipeline.sources.grounding) found of one statement of an article."""

    SUPPORTED = "supported"  # every specific it states is in a source
    UNSUPPORTED = "unsupported"  # a number, name, command or quotation no source holds
    NO_SPECIFICS = "no specifics"  # plain words: nothing this check can trace
    FIRST_PERSON = "first person"  # "we", "I" with no source the writer's own notes
    COPIED = "copied"  # a long run of a web page's words, unquoted

    @property
    def failing(self) -> bool:
        return self in (Grounded.UNSUPPORTED, Grounded.FIRST_PERSON, Grounded.COPIED)
