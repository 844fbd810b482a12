"""The exception tree, and the exit code each outcome maps to.

Errors split by *who must fix them*:

    PipelineError
     ├── OperatorError                the operator must fix; the run cannot go on
     │    ├── ConfigError             bad config file, bad env override, missing key   → exit 2
     │    ├── LedgerError             the ledger cannot be written mid-run             → exit 1
     │    │    └── LedgerUnavailable  the ledger cannot be reached or opened at all (server
     │    │                           down, a path that cannot hold it): one line    → exit 2
     │    ├── LedgerVersionError      the ledger's schema is newer than this program   → exit 2
     │    ├── ProviderUnavailableError  the LLM provider failed after bounded retries,
     │    │                           or gave no complete answer within call_deadline_s → exit 5
     │    ├── PlatformUnavailableError  the publishing platform failed the run's budget  → exit 6
     │    │                             of attempts ([publish] max_failed_attempts /
     │    │                             unavailable_after_s): publish stops calling it
     │    ├── EnvironmentFailure      the host failed the run: disk full               → exit 7
     │    └── DeadlineExceeded        a step or the run outlived its deadline          → exit 124
     ├── ChannelLocked                another process is running this channel          → exit 75
     ├── TickAlreadyRun               a scheduled tick that already has its run        → exit 0
     ├── RunInterrupted               SIGTERM/SIGINT: stopped between two steps         → exit 130
     ├── RunFailed                    the run ended without the business facts it needs
     │    ├── AgentHallucinationError claims still unbacked after the nudges           → exit 3
     │    ├── AgentIncompleteError    required facts missing, no false claims          → exit 4
     │    │    ├── AgentStuckError    the same call failed the same way stuck_after times → exit 4
     │    │    └── PublicationFailed  the platform refused or removed the article (WeChat
     │    │                           publish_status 2–6): final, not the model's to retry
     │    ├── AwaitingReview          [publish] review = "manual": the article waits for an
     │    │                           editor (pipeline review approve|reject)          → exit 8
     │    ├── DryRunDone              run --dry-run: the would-be post is in the preview
     │    │                           directory, nothing was published                 → exit 0
     │    └── PublicationSubmitted    an asynchronous platform accepted the publish task
     │                                but had not published it when the run's polling
     │                                budget ended: the next run resumes polling     → exit 9
     └── CapabilityError              the model must fix: sent back as the tool result;
          ├── ToolArgumentsError      unknown tool, malformed JSON, schema violation
          └── PublishOutcomeUnknown   (pipeline.publishing.publishers) the platform may hold the post:
                                      the row stays pending until ``find`` can tell

A ``CapabilityError`` never ends a run: the dispatcher records it as a failed
execution and hands its message to the model. Everything else ends the run
with the exit code below, and the run's ledger row says why.
"""

from __future__ import annotations

from enum import IntEnum

from .states import RunStatus


def clip(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, cut at a word's end and marked "…": never mid-word ("call dr")."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


class ExitCode(IntEnum):
    """Exit codes of ``pipeline run`` (documented in the README)."""

    DONE = 0
    INTERNAL = 1
    USAGE = 2
    HALLUCINATION = 3
    INCOMPLETE = 4
    PROVIDER_UNAVAILABLE = 5
    PLATFORM_UNAVAILABLE = 6
    ENVIRONMENT = 7  # the host, not the config or the code: disk full
    AWAITING_REVIEW = 8  # a business state: an editor must approve or reject the article
    SUBMITTED = 9  # submitted to an asynchronous platform, not yet verified: the next run finishes it
    DEADLINE = 124  # as timeout(1): a step or the whole run ran past its deadline
    LOCKED = 75  # EX_TEMPFAIL: try again later
    INTERRUPTED = 130

    @property
    def meaning(self) -> str:
        """The code in words, as ``pipeline run --help`` lists it."""
        return _MEANING[self]


_MEANING = {
    ExitCode.DONE: "done", ExitCode.INTERNAL: "internal", ExitCode.USAGE: "config",
    ExitCode.HALLUCINATION: "hallucination", ExitCode.INCOMPLETE: "incomplete",
    ExitCode.PROVIDER_UNAVAILABLE: "provider down", ExitCode.PLATFORM_UNAVAILABLE: "platform down",
    ExitCode.ENVIRONMENT: "environment (disk full)", ExitCode.AWAITING_REVIEW: "awaiting review",
    ExitCode.SUBMITTED: "submitted (not yet published)", ExitCode.LOCKED: "locked", ExitCode.DEADLINE: "deadline",
    ExitCode.INTERRUPTED: "interrupted",
}


def exit_codes() -> str:
    """Every exit code with its meaning, in numeric order: the one list the CLI's help is made from."""
    return ", ".join(f"{int(code)} {code.meaning}" for code in sorted(ExitCode)) + "."


class PipelineError(Exception):
    """Base of every error this package raises on purpose: the outcome it gives a run travels with it."""

    exit_code: ExitCode = ExitCode.INTERNAL
    run_status: RunStatus = RunStatus.ERROR  # what the run's ledger row says when this ends it


class OperatorError(PipelineError):
    """Something outside the model's control is wrong: config, disk, provider."""


class ConfigError(OperatorError):
    exit_code = ExitCode.USAGE


class LedgerError(OperatorError):
    exit_code = ExitCode.INTERNAL


class LedgerUnavailable(LedgerError):
    """The ledger cannot be reached or opened: its server refuses or does not answer, its file cannot be
    created or read. Every command says why in one line (host, port, the driver's reason) and exits 2,
    as for any other thing the operator must fix before anything can run; nothing is created."""

    exit_code = ExitCode.USAGE


class LedgerVersionError(OperatorError):
    """Raised at open when the ledger was migrated by a newer program (or a revision is unknown).

    The ledger is left untouched: an older program must not write to a schema it does not know.
    """

    exit_code = ExitCode.USAGE


class ProviderUnavailableError(OperatorError):
    exit_code = ExitCode.PROVIDER_UNAVAILABLE
    run_status = RunStatus.PROVIDER_UNAVAILABLE


class PlatformUnavailableError(OperatorError):
    """The platform kept failing (refused, timed out, 5xx) until the run's budget of attempts ran out."""

    exit_code = ExitCode.PLATFORM_UNAVAILABLE
    run_status = RunStatus.PLATFORM_UNAVAILABLE


class EnvironmentFailure(OperatorError):
    """The host cannot support the run (disk full): neither a bug nor a config error."""

    exit_code = ExitCode.ENVIRONMENT
    run_status = RunStatus.ENVIRONMENT


class DeadlineExceeded(OperatorError):
    """A call, a step or the run went past its total deadline (``what`` names which)."""

    exit_code = ExitCode.DEADLINE
    run_status = RunStatus.TIMED_OUT

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        super().__init__(f"{what}: no result within its {seconds:g} s deadline")


class TickAlreadyRun(PipelineError):
    """Raised before a run starts when its scheduled tick already completed (a duplicate or redelivered task).

    Not a failure: the tick's one run happened; this delivery has nothing to do.
    """

    exit_code = ExitCode.DONE


class ChannelLocked(PipelineError):
    """The channel's lock is held: a run of it is already in progress somewhere."""

    exit_code = ExitCode.LOCKED


class RunInterrupted(PipelineError):
    """A stop was requested; the run stopped between two steps and is recorded as interrupted."""

    exit_code = ExitCode.INTERRUPTED
    run_status = RunStatus.INTERRUPTED


class RunFailed(PipelineError):
    """The model stopped, but the ledger does not hold what a finished run needs."""


class AgentHallucinationError(RunFailed):
    """The model kept claiming work the ledger has no record of."""

    exit_code = ExitCode.HALLUCINATION
    run_status = RunStatus.HALLUCINATION

    def __init__(self, claimed: set[str], called: set[str], detail: str = "") -> None:
        self.claimed = set(claimed)
        self.called = set(called)
        msg = f"claimed {sorted(self.claimed)} but the ledger holds {sorted(self.called)}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


class AgentIncompleteError(RunFailed):
    """The model stopped (or ran out of turns) before the required facts existed."""

    exit_code = ExitCode.INCOMPLETE
    run_status = RunStatus.INCOMPLETE

    def __init__(self, missing: set[str], reason: str) -> None:
        self.missing = set(missing)
        super().__init__(f"{reason}; missing facts: {sorted(self.missing) or 'none'}")


class AgentStuckError(AgentIncompleteError):
    """The same call kept failing the same way: the run ends now, not at ``max_turns``."""

    def __init__(self, missing: set[str], tool: str, error: str, count: int) -> None:
        self.tool, self.error, self.count = tool, error, count
        super().__init__(missing, f"stuck: `{tool}` failed {count} times in a row with the same error ({clip(error, 200)})")


class PublicationFailed(AgentIncompleteError):
    """The platform refused the article for good (WeChat: 原创失败, 常规失败, 审核不通过) or removed it."""

    def __init__(self, reason: str) -> None:
        super().__init__({"publish"}, reason)


class AwaitingReview(RunFailed):
    """The run stopped before publishing, as configured: its article waits for an editor's decision."""

    exit_code = ExitCode.AWAITING_REVIEW
    run_status = RunStatus.AWAITING_REVIEW


class DryRunDone(RunFailed):
    """``pipeline run --dry-run`` reached publish: the would-be post was written to the preview directory."""

    exit_code = ExitCode.DONE
    run_status = RunStatus.DRY_RUN


class PublicationSubmitted(RunFailed):
    """The platform holds a publish task that has not finished: not published, not forgotten.

    The publication row stays ``submitted`` (or ``pending`` while the submit's
    answer is unknown); the next run's reconciliation resumes polling it.
    """

    exit_code = ExitCode.SUBMITTED
    run_status = RunStatus.SUBMITTED


class CapabilityError(PipelineError):
    """A tool call the model must correct. Its message goes back to the model verbatim."""


class ToolArgumentsError(CapabilityError):
    """Unknown tool, arguments that are not JSON, or arguments that fail the schema."""
