"""One run, start to finish: wire config → ledger → model → agent loop, then settle the outcome.

The runner is the only place that turns an exception into a run status and
an exit code, and it always writes that status to the run's ledger row
before returning, so ``pipeline ledger runs`` shows every outcome, failures
included. Pre-flight checks (API key present, publisher known, prompts and
claim rules valid) happen before a run row exists: a config error leaves the
ledger untouched.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import traceback
from dataclasses import dataclass
from datetime import datetime

from ..config import Config
from ..errors import EnvironmentFailure, ExitCode, PipelineError, RunInterrupted
from ..ledger import disk
from ..ledger.locks import channel_lock
from ..ledger.utc import sqlite_text, utcnow
from ..ledger.writer import Ledger
from ..model.llm import ChatModel, is_local
from ..publishing.publishers import get_publisher
from ..runtime import deadline, shutdown, tracing
from ..runtime.alerts import Alerter
from ..score import scoring
from ..states import ReviewStatus, RunStatus
from ..text import redact
from ..tools import catalog
from ..tools.claims import ClaimRules
from ..tools.prompts import Prompts
from ..tools.toolbox import RunContext
from ..views.metrics import export_after_run
from . import validate
from .agent import AgentLoop
from .events import RunObserver
from .guard import Guard
from .ticks import LeaseKeeper, settle_before_run

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    exit_code: int
    error: str | None = None


def preflight(cfg: Config, prompts: Prompts, validated: bool = False) -> ClaimRules:
    """Everything that can be wrong with the config, found before anything is recorded.

    ``validated``: the caller already ran ``validate.upfront`` on this config (the CLI does, before the lock).
    """
    if not validated:
        validate.upfront(cfg)
    rules = catalog.claim_rules(cfg.publish, cfg.claims, cfg.registration)
    get_publisher(cfg.publish, cfg.base_dir)
    ChatModel(cfg.llm)._api_key()
    if is_local(cfg.llm.model):
        from ..model.local.provider import prepare

        prepare(cfg.state_dir)  # runtime installed, weights assembled and checked: exit 2 here, not mid-run
    suffix = ".zh.md" if cfg.draft.language == "zh" else ".md"
    for name in ("system.md", "task.md", f"nudges.{cfg.agent.language}.toml", f"parts.{cfg.draft.language}.toml",
                 *(base + suffix for base in ("outline", "section", "rewrite", "notes", "from_notes"))):
        prompts._raw(name)
    return rules


def run_once(cfg: Config, observer: RunObserver | None = None, llm: ChatModel | None = None,
             ledger: Ledger | None = None, prompts: Prompts | None = None, lock_held: bool = False,
             dry_run: bool = False, tick: datetime | None = None, validated: bool = False) -> RunOutcome:
    """One run of ``cfg.channel``. Raises ChannelLocked (exit 75) before touching anything if it is running elsewhere.

    ``lock_held``: the caller already holds the channel lock (the CLI takes it before heavy imports).
    ``dry_run``: everything but the platform call; publish writes the would-be post to the preview directory.
    ``tick``: the scheduled firing this run serves (daemon, worker); TickAlreadyRun if it already ran.
    ``validated``: the caller ran the up-front checks on ``cfg`` already: the run validates once.
    """
    if lock_held:
        return _locked_run(cfg, observer, llm, ledger, prompts, dry_run, tick, validated)
    with channel_lock(cfg.ledger_url, cfg.state_dir, cfg.channel.name):
        return _locked_run(cfg, observer, llm, ledger, prompts, dry_run, tick, validated)


def _locked_run(cfg: Config, observer: RunObserver | None, llm: ChatModel | None, ledger: Ledger | None,
                prompts: Prompts | None, dry_run: bool = False, tick: datetime | None = None,
                validated: bool = False) -> RunOutcome:
    from ..publishing.settle import reconcile

    channel = cfg.channel.name
    redact.remember(cfg.secrets())  # before anything can be stored, printed, alerted or logged
    prompts = prompts or Prompts()
    rules = preflight(cfg, prompts, validated)
    tracing.configure(cfg.traces)
    own_ledger = ledger is None
    ledger = ledger or Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms)
    if ledger.sqlite_path is not None:
        disk.reserve(ledger.sqlite_path)
    alerter = Alerter(cfg.alerts)
    settings = cfg.run_settings()  # what the steps read: not the model, the schedule or the engine
    # We hold this channel's lock, so a run of it still marked "running" died without a word
    # (kill -9, power loss). Say so; the run below first settles what it may have left. (On
    # PostgreSQL the lock lives on the ledger's server, so it proves the same for runs started on
    # other hosts.)
    for run_id in ledger.mark_crashed(channel):
        alerter.alert(channel, run_id, "crashed", "the run's process died before it recorded an outcome")
    if tick is not None:
        # A tick ends on business state: an earlier attempt that published is settled, not run again.
        settle_before_run(settings, ledger, alerter, channel, tick)
    llm = llm or ChatModel(cfg.llm, data_dir=cfg.state_dir)
    scoring.configure(cfg.state_dir, cfg.path(cfg.humanize.scoring_model) if cfg.humanize.scoring_model else None)
    tools = catalog.toolbox()
    run = ledger.start_run(model=cfg.llm.model, channel=channel, guard_enabled=cfg.agent.hallucination_guard, tick=tick,
                           lease_s=cfg.engine.lease_s)
    _track(run.id, ledger)
    lease = contextlib.ExitStack()
    if tick is not None:
        claim = ledger.tick_row(channel, tick)
        assert claim is not None and claim.id is not None
        lease.enter_context(LeaseKeeper(ledger, claim.id, run.id, cfg.engine.lease_s))
        if claim.attempts > 1:
            alerter.alert(channel, run.id, "tick re-claimed", f"the {tick.isoformat()} tick, attempt {claim.attempts}: "
                                                              "the run before died without publishing; running it again")
    alerter.started(run.id, channel, cfg.llm.model)
    ctx = RunContext(run.id, settings, ledger, llm, prompts, dry_run=dry_run)
    guard = Guard(ledger, rules, cfg.agent.done_when, prompts, cfg.agent.language, tools.names, cfg.humanize.pass_mark(cfg.draft.language))
    observer = observer or RunObserver()
    observer.started(run.id, cfg.llm.model, channel)
    code: int
    status, code, error = RunStatus.DONE, ExitCode.DONE, None
    span = tracing.start("invoke_agent pipeline", **{
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "pipeline", "gen_ai.conversation.id": run.id,
        "gen_ai.request.model": cfg.llm.model, "pipeline.channel": channel})
    try:
        if shutdown.requested():
            raise RunInterrupted("stop requested before the run began")
        with deadline.limit(cfg.agent.run_deadline_s, "run"):
            # Before anything can publish again: settle what crashed runs left on the platform (a
            # crash-restart never publishes twice) and register what crashed or interrupted runs
            # published but never registered. Wrong credentials end the run here: exit 2.
            with tracing.current(span):
                reconcile(settings, ledger, alerter, channel=channel, run_id=run.id, older_than_min=0)
            if shutdown.requested():
                raise RunInterrupted("stop requested before the run began")
            with tracing.current(span):
                AgentLoop(ctx, tools, guard, cfg.agent, observer, channel).run()
    except PipelineError as exc:  # each carries its outcome: run status and exit code
        status, code, error = exc.run_status, exc.exit_code, str(exc)
    except KeyboardInterrupt:
        _finish(ledger, run.id, RunStatus.INTERRUPTED, int(ExitCode.INTERRUPTED), "interrupted by the operator")
        tracing.end(span, "interrupted by the operator", **{"pipeline.run.status": "interrupted"})
        raise
    except Exception as exc:
        where = ledger.sqlite_path.parent if ledger.sqlite_path is not None else cfg.state_dir
        if disk.is_full(exc, where):  # a site page or report that could not be written
            status, code, error = RunStatus.ENVIRONMENT, ExitCode.ENVIRONMENT, f"{disk.describe(where)}: {exc}"
        else:  # a bug: record it, keep the traceback in the log
            log.error("run %s crashed:\n%s", run.id, traceback.format_exc())
            status, code, error = RunStatus.ERROR, ExitCode.INTERNAL, f"{type(exc).__name__}: {exc}"
    finally:
        lease.close()  # the claim's renewal stops with the run's work; _finish marks its tick done
    status, code, error = _finish(ledger, run.id, status, int(code), error)
    tracing.end(span, error if status != RunStatus.DONE else None, **{"pipeline.run.status": status, "pipeline.exit_code": int(code)})
    # An article under the pass mark is recorded incomplete with a review waiting: held for an editor, not failed.
    outcome = "held" if status == RunStatus.INCOMPLETE and _held(ledger, run.id) else status
    if status != RunStatus.DONE:
        # Waiting for an editor, or a dry run, is a state the operator asked for: not an error line.
        say = log.warning if status.operator_asked or outcome == "held" else log.error
        say("run %s ended %s (exit %d): %s — see: pipeline ledger diff --run %s", run.id, outcome, code, error, run.id)
    alerter.finished(channel, run.id, outcome, int(code), error)
    export_after_run(cfg.metrics, cfg.ledger_url, cfg.base_dir, cfg.alerts.timeout_s)
    if own_ledger:
        try:
            ledger.close()
        except EnvironmentFailure as exc:  # the run row is written; a deferred record could not be
            log.error("%s", exc)
    return RunOutcome(run.id, status, int(code), error)


def _held(ledger: Ledger, run_id: str) -> bool:
    """The run's article waits for an editor (a review pending), as humanize leaves one under the pass mark."""
    from sqlmodel import select

    from ..ledger.models import Review

    try:
        with ledger.read() as s:
            return s.exec(select(Review.id).where(Review.run_id == run_id, Review.status == ReviewStatus.PENDING)).first() is not None
    except PipelineError:  # the ledger went away after the run's row was written: the alert still goes out
        return False


# --- the run's last row, whatever happens -------------------------------------------------

_active: dict[str, str] = {}  # run id -> ledger URL, for a forced exit
_active_lock = threading.Lock()


def _track(run_id: str, ledger: Ledger) -> None:
    with _active_lock:
        _active[run_id] = ledger.url


def _finish(ledger: Ledger, run_id: str, status: RunStatus, code: int, error: str | None) -> tuple[RunStatus, int, str | None]:
    """Write the run's outcome; on a full disk, free the reserve and write it anyway, as an environment failure."""
    try:
        ledger.finish_run(run_id, status, code, error)
    except EnvironmentFailure as exc:
        if status == RunStatus.DONE:
            status, code, error = RunStatus.ENVIRONMENT, int(exc.exit_code), f"the run's work is done, but {exc}"
        elif status != RunStatus.ENVIRONMENT:
            status, code, error = RunStatus.ENVIRONMENT, int(exc.exit_code), f"{exc} (while ending {status}: {error})"
        if ledger.sqlite_path is not None:
            disk.release(ledger.sqlite_path)
        try:
            ledger.finish_run(run_id, status, code, error)
        except EnvironmentFailure:
            lost = ledger.drop_deferred()  # the run's row matters most: without it the run would stay "running"
            log.error("disk full: %d uncommitted record(s) of run %s dropped to record its end", lost, run_id)
            ledger.finish_run(run_id, status, code, error)
    finally:
        with _active_lock:
            _active.pop(run_id, None)
    return status, code, error


def force_finish(reason: str = "interrupted by a second signal") -> None:
    """From a signal handler on the way out: mark this process's runs interrupted, in well under a second.

    A fresh connection, not the Ledger: the interrupted main thread may hold the Ledger's lock.
    If the database is busy the row stays "running" and the next run marks it crashed.
    """
    with _active_lock:
        active = dict(_active)
    now = utcnow()
    update = ("UPDATE runs SET status = 'interrupted', exit_code = 130, error = :reason, finished_at = :now "
              "WHERE id = :run_id AND status = 'running'")
    for run_id, url in active.items():
        params = {"reason": reason, "now": now, "run_id": run_id}
        try:
            if url.startswith("sqlite:///"):
                conn = sqlite3.connect(url[len("sqlite:///"):], timeout=0.5, isolation_level=None)
                try:
                    conn.execute(update, {**params, "now": sqlite_text(now)})
                finally:
                    conn.close()
            else:
                from sqlalchemy import create_engine, text
                from sqlalchemy.pool import NullPool

                engine = create_engine(url, poolclass=NullPool)
                with engine.begin() as server:
                    server.execute(text("SET LOCAL lock_timeout = '500ms'"))
                    server.execute(text(update), params)
                engine.dispose()
        except Exception as exc:  # on the way out: say it, never raise
            log.error("run %s left running: %s", run_id, exc)
