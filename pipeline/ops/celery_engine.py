"""``[engine] kind = "celery"``: the daemon schedules, ``pipeline worker`` processes run.

One Celery task, ``pipeline.run_tick(channel, scheduled_for)``: one scheduled firing of
one channel. Celery's own mechanisms carry the delivery guarantees:

* ``task_acks_late`` + ``task_reject_on_worker_lost``: a message is acknowledged after
  its run, so a worker that dies mid-run (kill -9, OOM) has its tick delivered again;
* ``worker_prefetch_multiplier = 1``: a worker reserves only what it runs, so a long run
  never hides queued ticks from idle workers;
* Redis ``visibility_timeout``: an unacknowledged message is redelivered after it (set
  above the longest run); RabbitMQ redelivers when the worker's connection closes;
* retries with exponential backoff, only when the ledger could not be reached.

At-least-once delivery becomes exactly one outcome per tick in the ledger: the run claims its
tick under UNIQUE(channel, scheduled_for) (``Ledger.start_run``), while holding the
channel's advisory lock, so a duplicate finds the tick done (a recorded no-op) or the channel
busy (recorded, retried every lease/3 s). A delivery after a dead attempt settles it first
(``pipeline.run.ticks``): an attempt that published ends the tick, it is not run again. A whole
worker that dies leaves its message unacknowledged (Redis: until ``visibility_timeout``);
its claim's lease lapses within ``lease_s`` and the daemon queues the tick again.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from ..errors import ChannelLocked, LedgerError, PipelineError, TickAlreadyRun

if TYPE_CHECKING:
    from celery import Celery

    from ..config import Config, EngineConfig

log = logging.getLogger(__name__)
tick_log = logging.getLogger("pipeline.ticks")

TASK = "pipeline.run_tick"
CONFIG_ENV = "PIPELINE_WORKER_CONFIG"


def broker_app(engine: EngineConfig) -> Celery:
    """A Celery app on ``[engine]``'s broker and queue, without the task: enough to inspect workers and the queue."""
    from celery import Celery

    app = Celery("pipeline", broker=engine.broker(), set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=engine.queue,
        task_ignore_result=True,  # outcomes live in the ledger, not in a result backend
        task_serializer="json", accept_content=["json"],
        broker_transport_options={"visibility_timeout": engine.visibility_timeout_s},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app


def make_app(cfg: Config) -> Celery:
    app = broker_app(cfg.engine)
    max_retries = cfg.engine.max_retries

    busy_every = max(1.0, cfg.engine.lease_s / 3)
    busy_retries = max(1, int(cfg.agent.run_deadline_s // busy_every) + 1)
    from celery.signals import worker_process_shutdown

    from . import _resident

    # A worker process stopping cleanly leaves a SQLite ledger's file complete (no WAL left to fold back).
    worker_process_shutdown.connect(lambda **_: _resident.checkpoint_all(), weak=False)

    @app.task(name=TASK, bind=True, max_retries=max_retries)
    def run_tick(self: Any, channel: str, scheduled_for: str) -> dict[str, Any]:
        tick_log.info("tick %s@%s received (delivery %d%s)", channel, scheduled_for, self.request.retries + 1,
                      ", redelivered" if (self.request.delivery_info or {}).get("redelivered") else "")
        try:
            return execute_tick(channel, datetime.fromisoformat(scheduled_for))
        except ChannelBusy as exc:
            # Recorded (tick_events "busy") and retried: the run holding the channel may be this very tick
            # (then the retry finds it done) or an earlier one (then this tick runs after it). Past the
            # longest run, the daemon's re-queue of unclaimed ticks takes over.
            if self.request.retries >= busy_retries:
                log.warning("channel %s tick %s: still busy after %d retries; left to the daemon's re-queue",
                            channel, scheduled_for, self.request.retries)
                return exc.result
            raise self.retry(countdown=busy_every, max_retries=busy_retries) from None
        except LedgerError as exc:  # the ledger's server went away: nothing half-written; try again
            log.warning("channel %s tick %s: %s; retry %d/%d", channel, scheduled_for, exc, self.request.retries + 1, max_retries)
            raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries)) from None

    return app


class ChannelBusy(Exception):
    """This delivery found its channel's lock held; ``result`` is what the task returns if it stops retrying."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result["skipped"])
        self.result = result


def send_tick(app: Any, cfg: Config, channel: str, scheduled_for: datetime) -> None:
    """Queue one firing. Sending twice is harmless: the run claims its tick once."""
    app.send_task(TASK, args=[channel, scheduled_for.isoformat()], queue=cfg.engine.queue,
                  task_id=f"{channel}@{scheduled_for.isoformat()}")


def execute_tick(channel: str, tick: datetime) -> dict[str, Any]:
    """In a worker process: run ``channel`` for ``tick`` with this process's model and ledger."""
    from ..run.runner import run_once
    from . import _resident

    cfg = config_mod.load(os.environ[CONFIG_ENV]).for_channel(channel)
    ledger = _resident.ledger_for(cfg.ledger_url, cfg.ledger.busy_timeout_ms)
    try:
        outcome = run_once(cfg, llm=_resident.model_for(cfg.llm, cfg.state_dir), ledger=ledger, tick=tick)
    except TickAlreadyRun as exc:
        tick_log.info("tick %s@%s %s", channel, tick.isoformat(), exc)
        return {"channel": channel, "tick": tick.isoformat(), "skipped": str(exc), "exit_code": int(exc.exit_code)}
    except ChannelLocked as exc:
        ledger.tick_event(channel, tick, "busy", f"{exc}; retried")
        raise ChannelBusy({"channel": channel, "tick": tick.isoformat(), "skipped": str(exc),
                           "exit_code": int(exc.exit_code)}) from None
    except LedgerError:
        raise
    except PipelineError as exc:
        log.error("channel %s: %s", channel, exc)
        return {"channel": channel, "tick": tick.isoformat(), "error": str(exc), "exit_code": int(exc.exit_code)}
    tick_log.info("tick %s@%s finished: run %s %s (exit %d)", channel, tick.isoformat(), outcome.run_id, outcome.status,
                  outcome.exit_code)
    _resident.checkpoint_all()  # periodically: after each run, so the WAL never grows across a worker's life
    return {"channel": channel, "tick": tick.isoformat(), "run_id": outcome.run_id, "status": outcome.status,
            "exit_code": outcome.exit_code}


def worker_main(config_path: str, concurrency: int, loglevel: str = "WARNING") -> None:
    """``pipeline worker``: a Celery worker (prefork) whose processes each keep one model and one ledger."""
    os.environ[CONFIG_ENV] = str(config_path)
    cfg = config_mod.load(config_path)
    app = make_app(cfg)
    if concurrency <= 0:
        concurrency = 1 if cfg.llm.model.startswith("local") else (os.cpu_count() or 1)
    app.worker_main(["worker", f"--concurrency={concurrency}", "--pool=prefork", f"--loglevel={loglevel}",
                     "-Q", cfg.engine.queue, "--without-gossip", "--without-mingle",
                     f"--hostname=pipeline-{os.getpid()}@%h"])


def workers_seen(app: Any, timeout_s: float = 1.0) -> list[str]:
    """Names of the workers that answered a ping."""
    replies = app.control.inspect(timeout=timeout_s).ping() or {}
    return sorted(replies)


def queue_depth(app: Any, queue: str) -> int:
    """Messages waiting in ``queue`` (not those a worker holds)."""
    from amqp.exceptions import NotFound
    from kombu.exceptions import ChannelError

    with app.connection_for_read() as conn:
        try:
            depth: int = conn.default_channel.queue_declare(queue=queue, passive=True).message_count
            return depth
        except (ChannelError, NotFound):  # no such queue yet (Redis drops empty ones): nothing waits
            return 0
