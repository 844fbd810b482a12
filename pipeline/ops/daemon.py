"""``pipeline daemon``: every channel on its cron schedule, in one long-lived process.

APScheduler 3 with:

* a cron trigger per channel, job id ``channel:<name>``, ``max_instances=1``
  and ``coalesce=True`` — however many ticks were missed, a channel runs at
  most once to catch up, and never twice at the same time;
* ``misfire_grace_time``: a tick later than that (the daemon was down too
  long) is reported as *missed* (alert), not run;
* a persistent SQLAlchemy job store in ``[daemon] state_dir``, owned by this
  daemon alone (APScheduler forbids sharing one between schedulers, so the
  daemon holds a lock on it and ``pipeline run`` never opens it). On restart
  a job whose schedule did not change keeps its stored next run time, which
  is what lets missed ticks be caught up exactly once;
* a pool as wide as the channel list, so channels due together run
  concurrently; each run still takes its channel's flock, shared with cron.
  Threads by default: runs share one model client and one ledger engine,
  and a run spends most of its time waiting on the model, not on Python CPU
  (``bench/bench_channels.py``). ``[daemon] executor = "process"`` uses a
  pool of worker processes instead, started and warmed (litellm imported)
  when the daemon starts, each keeping its model for every run it serves.

Stopping: SIGTERM/SIGINT stops new runs and is passed on to the workers; each
run finishes its current step (then it is recorded ``interrupted``); the
scheduler shuts down and the daemon exits 0. A second signal is passed on
too (workers mark their runs interrupted and exit) and the daemon exits 130.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from ..errors import ChannelLocked, PipelineError, TickAlreadyRun
from ..ledger.locks import hold
from ..run.events import RunObserver
from ..runtime import shutdown
from ..runtime.alerts import Alerter
from ..runtime.scheduling import make_trigger
from ..states import RunStatus
from . import _resident

if TYPE_CHECKING:
    from collections.abc import Iterator

    from apscheduler.executors.base import BaseExecutor
    from celery import Celery

    from ..config import Config
    from ..ledger.writer import Ledger

log = logging.getLogger(__name__)

JOBSTORE_FILE = "daemon-jobs.sqlite"
SIGNAL_POLL_S = 0.2
_lock = threading.Lock()  # guards _apps
_active: set[str] = set()  # run ids in progress, for a forced exit


def _ledger(cfg: Config) -> Ledger:
    """This process's ledger of ``cfg``, opened once and kept across runs."""
    return _resident.ledger_for(cfg.ledger_url, cfg.ledger.busy_timeout_ms)


def due_tick(cfg: Config, now: datetime | None = None) -> datetime | None:
    """The firing a job started now serves: the channel's latest fire time at or before now."""
    from datetime import timezone

    from ..runtime.scheduling import previous_fire

    chan = cfg.channel
    return previous_fire(make_trigger(chan.cron, chan.timezone), now or datetime.now(timezone.utc))


def run_channel(config_path: str, channel: str, tick: str | None = None) -> int:
    """The scheduled job. Module-level so the job store can reference it by name.

    ``tick`` (ISO time): the firing to serve; by default the one due now. The run claims it
    in the ledger, so the same firing never runs twice, whichever scheduler fired it.
    """
    from ..run.runner import run_once

    try:
        cfg = config_mod.load(config_path).for_channel(channel)
    except PipelineError as exc:
        log.error("channel %s: config error, run skipped: %s", channel, exc)
        return int(exc.exit_code)
    from ..text import redact

    redact.remember(cfg.secrets())  # before the alert below can quote an error body
    when = datetime.fromisoformat(tick) if tick else due_tick(cfg)

    class Track(RunObserver):
        def started(self, run_id: str, model: str, channel: str) -> None:
            _active.add(run_id)

    try:
        outcome = run_once(cfg, observer=Track(), llm=_resident.model_for(cfg.llm, cfg.state_dir), ledger=_ledger(cfg),
                           tick=when)
    except (ChannelLocked, TickAlreadyRun) as exc:
        log.warning("channel %s: %s", channel, exc)
        return int(exc.exit_code)
    except PipelineError as exc:
        log.error("channel %s: %s", channel, exc)
        Alerter(cfg.alerts).alert(channel, None, "error before the run started", str(exc))
        return int(exc.exit_code)
    _active.discard(outcome.run_id)
    log.info("channel %s: run %s %s (exit %d)", channel, outcome.run_id, outcome.status, outcome.exit_code)
    return outcome.exit_code


def dispatch_channel(config_path: str, channel: str, tick: str | None = None) -> int:
    """The scheduled job with ``[engine] kind = "celery"``: queue the due firing for a worker.

    The tick's row (``queued``) is written before the message is sent, so every tick the daemon
    queued has a row, and one the broker lost is sent again by ``resend_unclaimed``.
    """
    from .celery_engine import send_tick

    cfg = config_mod.load(config_path).for_channel(channel)
    when = datetime.fromisoformat(tick) if tick else due_tick(cfg)
    if when is None:
        return 0
    if not _ledger(cfg).queue_tick(channel, when):
        log.info("channel %s: tick %s already done; not queued", channel, when.isoformat())
        return 0
    send_tick(_celery_app(cfg), cfg, channel, when)
    return 0


# Re-queue only ticks this recent: an older one left claimed needs the operator (`pipeline ledger check`).
RESEND_HORIZON = timedelta(days=1)


def resend_unclaimed(config_path: str) -> int:
    """Queue again, from the ledger: ticks no worker claimed within ``resend_after_s`` (a broker restart may
    have lost them), and ticks whose claim's lease lapsed (the worker died; Redis would hold its message
    until ``visibility_timeout_s``). Every leading daemon sees the same rows, so a new leader resends too."""
    from .celery_engine import send_tick

    cfg = config_mod.load(config_path)
    ledger = _ledger(cfg)
    due = ledger.resend_due(cfg.channel_names(), cfg.engine.lease_s, cfg.engine.resend_after_s, RESEND_HORIZON)
    for channel, tick, why in due:
        log.warning("channel %s: tick %s queued again: %s", channel, tick.isoformat(), why)
        chan_cfg = cfg.for_channel(channel)
        send_tick(_celery_app(chan_cfg), chan_cfg, channel, tick)
    return len(due)


_apps: dict[str, Celery] = {}


def _celery_app(cfg: Config) -> Celery:
    from .celery_engine import make_app

    with _lock:
        key = cfg.engine.broker()
        if key not in _apps:
            _apps[key] = make_app(cfg)
        return _apps[key]


def _worker_init(daemon_pid: int) -> None:
    """In each worker process: import the heavy modules now, and stop gracefully on signals."""
    from ..model.llm import _load_litellm
    from ..run.runner import run_once  # noqa: F401  (import cost paid before the first tick)

    _die_with_parent(daemon_pid)

    _load_litellm()

    def force() -> None:
        # Not through a Ledger: the signal interrupted this process's main thread, which may be
        # inside a ledger write holding the ledger's lock.
        from ..run.runner import force_finish

        force_finish("daemon forced to exit by a second signal")

    shutdown.install(on_force=force)


def _die_with_parent(daemon_pid: int) -> None:
    """Linux: SIGKILL this worker when the daemon dies, even by kill -9; an orphaned worker would keep
    the model in memory and the daemon's output pipes open. A killed run is settled like any crash."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != daemon_pid:  # the daemon died before the line above: nobody is left to signal us
        os._exit(1)


def _warm() -> int:
    return os.getpid()


def pool_size(cfg: Config) -> int:
    if cfg.daemon.workers:
        return cfg.daemon.workers
    if cfg.llm.model.startswith("local"):
        return 1
    return max(1, min(32, len(cfg.channel_names())))


def _executor(cfg: Config) -> BaseExecutor:
    from apscheduler.executors.pool import ProcessPoolExecutor, ThreadPoolExecutor

    if cfg.daemon.executor == "thread":
        return ThreadPoolExecutor(max_workers=pool_size(cfg))
    return ProcessPoolExecutor(max_workers=pool_size(cfg), pool_kwargs={"initializer": _worker_init, "initargs": (os.getpid(),)})


def warm(scheduler: Any) -> None:
    """Start every worker process now, so the first tick does not pay for imports."""
    pool = scheduler._lookup_executor("default")._pool
    n = getattr(pool, "_max_workers", 1)
    futures = [pool.submit(_warm) for _ in range(n * 2)]
    for f in futures:
        f.result()


def _workers(scheduler: Any) -> list[int]:
    pool = scheduler._lookup_executor("default")._pool
    return list(getattr(pool, "_processes", {}) or {})


def _signal_workers(scheduler: Any, sig: signal.Signals = signal.SIGTERM) -> None:
    for pid in _workers(scheduler):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _mark_interrupted(cfg: Config) -> None:
    """Mark runs left ``running`` as interrupted: ours, and any whose channel lock nobody holds any more."""
    from sqlmodel import select

    from ..errors import ChannelLocked
    from ..ledger.locks import channel_lock
    from ..ledger.models import Run
    from ..ledger.writer import Ledger

    ledger = Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms)
    with ledger.read() as s:
        running = s.exec(select(Run).where(Run.status == RunStatus.RUNNING)).all()
    for run in running:
        orphaned = False
        if run.id not in _active:
            try:
                with channel_lock(cfg.ledger_url, cfg.state_dir, run.channel):
                    orphaned = True  # its process is gone: the kernel released the lock
            except ChannelLocked:
                continue
        if run.id in _active or orphaned:
            ledger.finish_run(run.id, "interrupted", 130, "daemon forced to exit by a second signal")


def build_scheduler(cfg: Config, config_path: str, *, durable: bool = True) -> Any:
    """A paused scheduler with one job per channel; call ``resume()`` to start firing.

    ``durable``: keep jobs in a SQLite job store in ``state_dir`` (one daemon per host). Highly
    available daemons (PostgreSQL ledger) keep them in memory instead: APScheduler forbids sharing
    a job store between live schedulers, and their missed ticks are found in the ledger's ticks.
    """
    from apscheduler.events import EVENT_JOB_MISSED
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    names = cfg.channel_names()
    job_fn = dispatch_channel if cfg.engine.kind == "celery" else run_channel
    store = SQLAlchemyJobStore(url=f"sqlite:///{cfg.state_dir / JOBSTORE_FILE}") if durable else MemoryJobStore()
    scheduler = BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": _executor(cfg)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": cfg.daemon.misfire_grace_time_s},
    )

    def on_missed(event: Any) -> None:
        channel = event.job_id.split(":", 1)[-1]
        log.error("channel %s: run due at %s missed (beyond misfire_grace_time)", channel, event.scheduled_run_time)
        Alerter(cfg.alerts).alert(channel, None, "missed", f"scheduled run at {event.scheduled_run_time} did not happen")

    scheduler.add_listener(on_missed, EVENT_JOB_MISSED)
    scheduler.start(paused=True)
    wanted = set()
    for name in names:
        chan = cfg.for_channel(name).channel
        trigger = make_trigger(chan.cron, chan.timezone)
        job_id = f"channel:{name}"
        wanted.add(job_id)
        existing = scheduler.get_job(job_id)
        keep = {}
        if existing is not None and repr(existing.trigger) == repr(trigger) and existing.next_run_time is not None:
            keep["next_run_time"] = existing.next_run_time  # keeps missed ticks visible to coalescing
        scheduler.add_job(job_fn, trigger, args=[config_path, name], id=job_id, name=name,
                          replace_existing=True, **keep)
    for job in scheduler.get_jobs():
        if job.id not in wanted:
            job.remove()
    if cfg.engine.kind == "celery":
        # Often enough to notice a lapsed lease within lease_s / 3, and a lost message within resend_after_s / 4.
        every = max(1.0, min(cfg.engine.resend_after_s / 4, cfg.engine.lease_s / 3))
        scheduler.add_job(resend_unclaimed, "interval", args=[config_path], id="resend-unclaimed", name="resend",
                          seconds=every, replace_existing=True)
    return scheduler


def catch_up(cfg: Config, config_path: str, scheduler: Any, now: datetime | None = None) -> list[tuple[str, datetime]]:
    """On taking the lead: each channel's latest firing that nobody completed, run (or queued) once.

    Only channels with a tick in the ledger count (they were being scheduled), and only
    firings within ``misfire_grace_time_s``; the run's claim on the tick keeps it to once.
    """
    from datetime import timedelta, timezone

    from sqlmodel import select

    from ..ledger.models import Tick

    now = now or datetime.now(timezone.utc)
    ledger = _ledger(cfg)
    job = dispatch_channel if cfg.engine.kind == "celery" else run_channel
    due = []
    for name in cfg.channel_names():
        with ledger.read() as s:
            known = s.exec(select(Tick.id).where(Tick.channel == name).limit(1)).first()
        tick = due_tick(cfg.for_channel(name), now)
        if known is None or tick is None or now - tick > timedelta(seconds=cfg.daemon.misfire_grace_time_s):
            continue
        if ledger.tick_state(name, tick) != "done":
            scheduler.add_job(job, args=[config_path, name, tick.isoformat()], id=f"catch-up:{name}", name=name,
                              replace_existing=True)
            due.append((name, tick))
            log.warning("channel %s: catching up the %s tick", name, tick.isoformat())
    return due


def _leadership(cfg: Config, stopped: threading.Event) -> AbstractContextManager[Any]:
    """The right to schedule: a flock on this host's job store, or with PostgreSQL the cluster-wide lead.

    With PostgreSQL, every daemon but one stands by, trying for the lead every ``standby_poll_s``;
    the server releases it when the leader's session ends (the leader died), so a standby takes
    over within about that interval.
    """
    from contextlib import ExitStack, contextmanager

    from ..ledger.locks import lead_label, pg_hold

    if not cfg.ledger_url.startswith("postgres"):
        return hold(cfg.state_dir / "daemon.lock", "the daemon's job store")

    @contextmanager
    def lead() -> Iterator[Any]:
        logged = False
        while not stopped.is_set():
            with ExitStack() as stack:
                try:
                    conn = stack.enter_context(pg_hold(cfg.ledger_url, "scheduler", "the scheduler's lead",
                                                       label=lead_label()))
                except ChannelLocked as exc:
                    if not logged:
                        log.warning("standing by: %s", str(exc).removeprefix("skipped: "))
                        logged = True
                    stopped.wait(cfg.daemon.standby_poll_s)
                    continue
                log.info("leading: this daemon schedules every channel")
                yield conn
                return
        yield None  # stopped while standing by

    return lead()


def _watch_lead(conn: Any, cfg: Config, stopped: threading.Event, lost: threading.Event) -> None:
    """A leader whose session died (server restart, network) may have lost the lead: stop scheduling."""
    while not stopped.wait(cfg.daemon.standby_poll_s):
        try:
            conn.execute("SELECT 1")
        except Exception as exc:  # any failure of the session means the lock may be gone
            log.error("lost the scheduler's lead (%s): stopping", exc)
            lost.set()
            stopped.set()
            return


def serve(config_path: str, ready: threading.Event | None = None, standing_by: threading.Event | None = None) -> int:
    """Run until a signal. Returns the exit code (0 after a graceful stop, 1 if the lead was lost)."""
    cfg = config_mod.load(config_path)
    path = str(Path(config_path).resolve())
    os.environ["PIPELINE_DAEMON_CONFIG"] = path  # read by worker processes on a forced exit
    _ledger(cfg)  # first: a ledger that cannot be reached is one line and exit 2, with nothing created
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    ha = cfg.ledger_url.startswith("postgres")
    stopped, lost = threading.Event(), threading.Event()
    scheduler = None

    def first() -> None:
        if scheduler is not None:
            _signal_workers(scheduler)
        stopped.set()

    def force() -> None:
        if scheduler is None:
            return
        from ..run.runner import force_finish

        force_finish("daemon forced to exit by a second signal")  # runs on this process's threads
        _signal_workers(scheduler)  # their second signal: they mark their runs interrupted and exit
        # A worker that saw the two signals merged into one is stopping gracefully and would outlive us,
        # holding the daemon's stdout and stderr open: what is left after the grace is killed.
        if not _wait_exited(_workers(scheduler), shutdown.FORCE_GRACE_S / 2):
            _signal_workers(scheduler, signal.SIGKILL)
            _wait_exited(_workers(scheduler), shutdown.FORCE_GRACE_S / 4)
        _mark_interrupted(cfg)  # a killed worker's run too: the kernel released its channel lock

    shutdown.install(on_first=first, on_force=force)
    if standing_by:
        standing_by.set()
    with _leadership(cfg, stopped) as lead:
        if stopped.is_set():
            return 0
        scheduler = build_scheduler(cfg, path, durable=not ha)
        if cfg.daemon.executor == "process" and cfg.engine.kind == "local":
            warm(scheduler)
        if ha:
            catch_up(cfg, path, scheduler)
            threading.Thread(target=_watch_lead, args=(lead, cfg, stopped, lost), daemon=True).start()
        metrics_server = _serve_metrics(cfg)
        ledger = _ledger(cfg)
        me = ledger.daemon_started()  # from now on its ticks count for `pipeline status`
        beats = threading.Thread(target=_heartbeat, args=(ledger, me, cfg.daemon.heartbeat_s, stopped), daemon=True)
        beats.start()
        scheduler.resume()
        log.info("daemon started (pid %d): %d channel(s), engine %s", os.getpid(), len(cfg.channel_names()),
                 cfg.engine.kind)
        for job in scheduler.get_jobs():
            log.info("channel %s: next run %s", job.name, job.next_run_time)
        if ready:
            ready.set()
        # Wake now and then: a signal delivered to another thread does not interrupt a wait with no timeout,
        # and Python runs signal handlers only when the main thread gets back to its bytecode loop.
        while not stopped.wait(SIGNAL_POLL_S):
            pass
        log.warning("stopping: waiting for runs in progress to reach the end of their step")
        scheduler.shutdown(wait=True)
        beats.join(timeout=5)
        try:
            ledger.daemon_stopped(me)
        except PipelineError as exc:
            log.error("could not record the daemon's stop: %s", exc)
        # The daemon exits without interpreter teardown (no connection closes, so SQLite would not fold
        # its WAL back): leave ledger.db complete for a file copy or an immutable reader.
        ledger.checkpoint()
        if metrics_server is not None:
            metrics_server.shutdown()
        log.info("daemon stopped")
    return 1 if lost.is_set() else 0


def _heartbeat(ledger: Any, me: str, every_s: float, stopped: threading.Event) -> None:
    """Prove this daemon alive in the ledger, and keep a SQLite ledger's WAL short, every ``every_s``.

    A thread of its own: a pool busy with long runs must not make a live daemon look dead.
    """
    while not stopped.wait(every_s):
        try:
            ledger.daemon_beat(me)
            ledger.checkpoint()
        except PipelineError as exc:  # a full disk or a locked ledger: the next beat tries again
            log.error("heartbeat not written: %s", exc)


def _serve_metrics(cfg: Config) -> Any:
    """Prometheus /metrics at [metrics] listen, read from the ledger at each scrape."""
    if not cfg.metrics.listen:
        return None
    from ..errors import ConfigError
    from ..views import metrics

    try:
        server = metrics.serve(cfg.metrics.listen, cfg.ledger_url)
    except OSError as exc:
        raise ConfigError(f"[metrics] listen {cfg.metrics.listen}: {exc.strerror or exc}") from None
    log.info("metrics at http://%s/metrics", cfg.metrics.listen)
    return server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _exited(pid: int) -> bool:
    """True once our child ``pid`` is gone; reaps it, since a zombie still answers ``kill(pid, 0)``."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours, or already reaped by the pool's manager thread
        return not _alive(pid)
    return done == pid


def _wait_exited(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid for pid in pids if not _exited(pid)]
        if not pids or time.monotonic() >= deadline:
            return not pids
        time.sleep(0.05)
