"""Killing real `pipeline worker` processes at a step boundary, for tests/test_worker_kills.py and the fault bench.

A worker starts as ``python tests/faults.py worker …`` with ``PIPELINE_FAULT=<step>`` (tests/faults.py
``STEPS``): the first process to reach that step dies, by ``os._exit`` (``kind="child"``: the prefork
child running the task; its parent lives on) or by SIGKILL to its whole process group
(``kind="worker"``: parent and children at once, then a new worker is started, as a supervisor would).
The fault fires once per arming: it creates ``once`` before dying, and is armed again by removing it.
A leading `pipeline daemon` runs beside the workers: its re-queue is what finds a lapsed lease.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sqlmodel import select

from pipeline.ledger.models import Publication, Registration, Tick
from pipeline.ledger.writer import Ledger

from support import DRAFT_FOR_SCRIPTED_MODEL, SOURCED_BACKLOG

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
KEY_ENV = "PIPELINE_TEST_LLM_KEY"


def celery_config(directory: Path, api_base: str, ledger_url: str, broker: str, channels: list[str], *,
                  lease_s: int = 6, scenario: str = "honest") -> Path:
    """Channels that never fire on their own (the test sends their ticks); Redis's visibility timeout left at
    its default hour, so a redelivery within the bound can only come from the lease."""
    chans = "".join(f'\n[[channels]]\nname = "{c}"\ncron = "0 9 * * *"\n' for c in channels)
    path = directory / "config.toml"
    path.write_text(f"""
[llm]
model = "openai/{scenario}"
api_base = "{api_base}"
api_key_env = "{KEY_ENV}"
max_retries = 2
backoff_s = 0.05
timeout_s = 30
[ledger]
url = "{ledger_url}"
[topic]
backlog = "{SOURCED_BACKLOG}"
{DRAFT_FOR_SCRIPTED_MODEL}
[publish.local]
dir = "site"
base_url = "http://127.0.0.1:8765"
[daemon]
standby_poll_s = 0.5
[engine]
kind = "celery"
broker_url = "{broker}"
queue = "kills-{secrets.token_hex(4)}"
visibility_timeout_s = 3600
lease_s = {lease_s}
{chans}""", encoding="utf-8")
    return path


def recent_tick() -> datetime:
    """A firing a minute ago (the daemon re-queues only recent ticks)."""
    now = datetime.now(timezone.utc)
    return now.replace(second=0, microsecond=0)


class Proc:
    """A `pipeline` CLI subprocess (worker or daemon) in a session of its own, its output in a file."""

    def __init__(self, config: Path, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        full = {**os.environ, KEY_ENV: "sk-test-not-a-real-key", **(env or {})}
        full["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), full.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen([sys.executable, str(TESTS / "faults.py"), *args, "--config", str(config)],
                                     cwd=config.parent, env=full, stdout=log.open("a"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:
            try:  # a whole-group kill leaves nothing; a dead parent may leave children
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def worker(config: Path, log: Path, fault: str | None = None, kind: str = "child", once: Path | None = None) -> Proc:
    env = {}
    if fault:
        env = {"PIPELINE_FAULT": fault, "PIPELINE_FAULT_ONCE": str(once)}
        if kind == "worker":
            env["PIPELINE_FAULT_SCOPE"] = "group"
    return Proc(config, ["worker", "--concurrency", "1"], log, env)


def daemon(config: Path, log: Path) -> Proc:
    return Proc(config, ["daemon"], log)


def wait(predicate, timeout: float, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    if what:
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
    return None


@dataclass
class TickCount:
    state: str | None
    attempts: int
    posts: int  # verified publications of every run of the tick
    registrations: int
    run_statuses: list[str]
    finished_at: datetime | None
    events: list[str]


def count(ledger: Ledger, channel: str, tick: datetime) -> TickCount:
    from pipeline.ledger.models import Run

    with ledger.read() as s:
        row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
    if row is None:
        return TickCount(None, 0, 0, 0, [], None, [])
    runs = ledger.runs_of_tick(row.id)
    with ledger.read() as s:
        # Every run of the channel, not only the tick's: a second run that claimed nothing would show here too.
        all_runs = s.exec(select(Run).where(Run.channel == channel).order_by(Run.started_at)).all()
        ids = [r.id for r in all_runs]
        pubs = s.exec(select(Publication).where(Publication.run_id.in_(ids), Publication.status == "verified")).all()
        regs = s.exec(select(Registration).where(Registration.publication_id.in_([p.id for p in pubs]))).all() if pubs else []
    assert set(runs) <= set(ids)
    return TickCount(row.state, row.attempts, len(pubs), len(regs), [r.status for r in all_runs], row.finished_at,
                     [e.kind for e in ledger.tick_events(row.id)])


def done(ledger: Ledger, channel: str, tick: datetime) -> bool:
    with ledger.read() as s:
        row = s.exec(select(Tick).where(Tick.channel == channel, Tick.scheduled_for == tick)).first()
        return row is not None and row.state == "done"
