"""The ledger's guarantees: durable settings, one writer at a time, facts only from successes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from pipeline.errors import LedgerError
from pipeline.ledger.writer import Ledger


@pytest.fixture
def ledger(tmp_path):
    return Ledger(f"sqlite:///{tmp_path}/ledger.db", busy_timeout_ms=300)


@pytest.fixture
def any_ledger(ledger_url):
    """The same guarantees on every backend: SQLite and a real PostgreSQL."""
    return Ledger(ledger_url, busy_timeout_ms=300)


def test_sqlite_runs_in_wal_with_full_sync(ledger):
    with ledger.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 300
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_only_successful_executions_are_facts(any_ledger):
    ledger = any_ledger
    run = ledger.start_run("m")
    turn = ledger.add_turn(run.id, "assistant", None)
    ok = ledger.open_execution(run.id, turn, "c1", "publish", "{}")
    ledger.close_execution(ok, True, {"url": "http://127.0.0.1/a.html"})
    failed = ledger.open_execution(run.id, turn, "c2", "register", "{}")
    ledger.close_execution(failed, False, error="boom")
    ledger.open_execution(run.id, turn, "c3", "report", "{}")  # a crash: never finished
    ledger.record_failed_call(run.id, turn, "c4", "deploy", "{}", "unknown tool")
    facts = ledger.facts(run.id)
    assert [(f.capability, f.value) for f in facts] == [("publish", "http://127.0.0.1/a.html")]
    executions = ledger.executions(run.id)
    assert [e.ok for e in executions] == [True, False, None, False]
    assert {e.turn_id for e in executions} == {turn.id} and turn.id is not None


def test_turns_are_deferred_to_the_next_write_but_never_lost(any_ledger):
    ledger = any_ledger
    run = ledger.start_run("m")
    first = ledger.add_turn(run.id, "user", "hello")
    second = ledger.add_turn(run.id, "assistant", "hi")
    assert first.id is None  # not committed yet: no fsync spent on it
    ledger.record_claims(run.id, second, [{"capability": "publish", "text": "published", "status": "unbacked"}])
    assert first.id and second.id > first.id
    assert [c.turn_id for c in ledger.claims(run.id)] == [second.id]
    ledger.add_turn(run.id, "assistant", "bye")
    ledger.close()  # closing commits what is still deferred
    assert [t.seq for t in Ledger(ledger.url).turns(run.id)] == [1, 2, 3]


@pytest.mark.slow  # a second process holds the lock
def test_writes_take_the_write_lock_at_begin(ledger, tmp_path):
    """BEGIN IMMEDIATE: a second writer waits for the busy timeout, then fails loudly — never a silent lost write."""
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, time, sys
c = sqlite3.connect("{tmp_path}/ledger.db", isolation_level=None)
c.execute("BEGIN IMMEDIATE"); print("locked", flush=True); time.sleep(3); c.execute("ROLLBACK")
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        with pytest.raises(LedgerError, match="locked"):
            ledger.start_run("m")
        assert time.monotonic() - started >= 0.25  # it waited for the busy timeout first
    finally:
        holder.wait(timeout=10)
    assert ledger.start_run("m").id  # and works once the lock is gone


def test_reads_do_not_block_behind_a_writer(ledger, tmp_path):
    run = ledger.start_run("m")
    c = sqlite3.connect(f"{tmp_path}/ledger.db", isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    try:
        assert ledger.get_run(run.id).id == run.id  # WAL: readers see the last commit
    finally:
        c.execute("ROLLBACK")


def test_write_is_all_or_nothing(any_ledger):
    ledger = any_ledger
    run = ledger.start_run("m")
    with pytest.raises(RuntimeError), ledger.write() as s:
        from pipeline.ledger.models import Report

        s.add(Report(run_id=run.id, body="half"))
        s.flush()
        raise RuntimeError("crash mid-transaction")
    from sqlmodel import select

    from pipeline.ledger.models import Report

    with ledger.read() as s:
        assert s.exec(select(Report)).all() == []


def test_latest_run_and_nudge_counter(any_ledger):
    ledger = any_ledger
    first = ledger.start_run("m")
    second = ledger.start_run("m")
    assert ledger.get_run().id == second.id
    assert ledger.record_guard_event(first.id, None, "incomplete", "nudge", 0, "call publish") == 1
    assert ledger.record_guard_event(first.id, None, "incomplete", "nudge", 0, "call publish") == 2
    assert ledger.get_run(first.id).nudges == 2
    ledger.finish_run(first.id, "done", 0)
    assert ledger.get_run(first.id).status == "done"


def test_unopenable_ledger_is_an_operator_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(LedgerError):
        Ledger(f"sqlite:///{tmp_path}/file/ledger.db")


def test_deferred_records_survive_a_rolled_back_write(any_ledger):
    ledger = any_ledger
    """A capability that fails inside its write must not take the deferred turns down with it."""
    run = ledger.start_run("m")
    turn = ledger.add_turn(run.id, "assistant", "calling publish")
    ex = ledger.open_execution(run.id, turn, "c1", "publish", "{}")
    with pytest.raises(RuntimeError), ledger.write():
        raise RuntimeError("the capability failed mid-transaction")
    ledger.close_execution(ex, False, error="failed")
    [row] = ledger.executions(run.id)
    assert row.ok is False and row.turn_id == turn.id
    assert [t.content for t in ledger.turns(run.id)] == ["calling publish"]
