"""The ledger's schema is owned by Alembic revisions: old ledgers upgrade in place, new ones are refused.

Runs on SQLite and on a real PostgreSQL (``ledger_url`` is parametrised over both).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect
from sqlmodel import SQLModel

from pipeline.errors import ExitCode, LedgerVersionError
from pipeline.ledger import migrations, models  # noqa: F401
from pipeline.ledger.check import check
from pipeline.ledger.utc import aware
from pipeline.ledger.writer import Ledger

FIXTURE = Path(__file__).parent / "fixtures" / "ledger-0.1.0.db"
REPO = Path(__file__).resolve().parent.parent


def _drift(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={
                "compare_type": True,
                "include_name": lambda name, type_, _p: type_ != "table" or name in migrations.LEDGER_TABLES})
            return compare_metadata(context, SQLModel.metadata)
    finally:
        engine.dispose()


def _schema(url: str) -> dict:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            insp = inspect(conn)
            return {t: (sorted((c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(t)),
                        sorted(i["name"] for i in insp.get_indexes(t)),
                        sorted(str(u["column_names"]) for u in insp.get_unique_constraints(t)))
                    for t in insp.get_table_names()}
    finally:
        engine.dispose()


def _rows(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in migrations.BASELINE_TABLES}
    finally:
        conn.close()


_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")


def _times_as_instants(rows: list[tuple]) -> list[tuple]:
    """Each stored time as the instant it names (revision 0012 rewrites the text, never the time)."""
    return [tuple(aware(datetime.fromisoformat(v)) if isinstance(v, str) and _TIME.fullmatch(v[:19]) else v
                  for v in row) for row in rows]


def test_head_is_the_newest_revision_and_baseline_the_oldest():
    known = migrations.known_revisions()
    assert known[0] == migrations.BASELINE and known[-1] == migrations.HEAD


def test_models_match_the_migrated_schema(ledger_url):
    """The autogenerate check: a model changed without a revision fails here."""
    Ledger(ledger_url).close()
    assert _drift(ledger_url) == []


def test_the_drift_check_sees_a_missing_revision(ledger_url):
    """The check above can fail: a ledger one revision behind differs from the models."""
    migrations.migrate(create_engine(ledger_url), "0001")
    diffs = [str(d) for d in _drift(ledger_url)]
    assert any("remote_id" in d for d in diffs) and any("ix_runs_channel_started_at" in d for d in diffs)


def test_a_ledger_made_by_0_1_0_upgrades_in_place_with_every_row(tmp_path):
    path = tmp_path / "ledger.db"
    shutil.copy(FIXTURE, path)
    before = _rows(path)
    assert sum(map(len, before.values())) > 100 and before["registrations"], "the fixture holds real rows"

    ledger = Ledger(f"sqlite:///{path}")
    assert ledger.migration.stamped_legacy and ledger.migration.after == migrations.HEAD
    after = _rows(path)
    times = [v for rows in after.values() for r in rows for v in r if isinstance(v, str) and _TIME.fullmatch(v[:19])]
    assert len(times) > 100 and all(t.endswith("+00:00") and len(t) == 32 for t in times), "times written with offset"
    for table, rows in before.items():
        rows, new = _times_as_instants(rows), _times_as_instants(after[table])
        if table in ("publications", "runs", "articles"):  # columns added at the end, NULL for old rows
            width = len(rows[0])
            assert [r[:width] for r in new] == rows
            assert all(v is None for r in new for v in r[width:])
        else:
            assert new == rows, table
    # The old rows read through today's code: facts, claims, the diff.
    run_ids = [r.id for r in ledger.runs()]
    assert len(run_ids) == 4
    assert {f.capability for f in ledger.facts(run_ids[0])} >= {"publish", "register"}
    assert check(ledger.engine).ok
    assert _drift(f"sqlite:///{path}") == []


def test_times_get_their_offset_and_a_downgrade_gives_the_old_text_back(tmp_path):
    """Revision 0012 on SQLite: ISO text with +00:00 (what datasette shows), the same instants, reversible."""
    path = tmp_path / "ledger.db"
    shutil.copy(FIXTURE, path)
    original = _rows(path)
    engine = create_engine(f"sqlite:///{path}")
    migrations.migrate(engine)
    upgraded = _rows(path)
    assert upgraded["runs"][0][3].endswith("+00:00") and "T" in upgraded["runs"][0][3]
    migrations.migrate(engine, "0011", allow_downgrade=True)
    downgraded = _rows(path)
    assert {t: rows for t, rows in downgraded.items() if t != "publications"} == \
        {t: rows for t, rows in original.items() if t != "publications"}
    assert [r[:len(original["publications"][0])] for r in downgraded["publications"]] == original["publications"]
    migrations.migrate(engine)
    assert _rows(path) == upgraded
    engine.dispose()


def test_upgrade_downgrade_base_upgrade_round_trips(ledger_url):
    engine = create_engine(ledger_url)
    assert migrations.migrate(engine).after == migrations.HEAD
    head_schema = _schema(ledger_url)
    migrations.migrate(engine, "base", allow_downgrade=True)
    assert set(_schema(ledger_url)) <= {"alembic_version"}
    migrations.migrate(engine)
    assert _schema(ledger_url) == head_schema
    engine.dispose()


def test_a_downgrade_needs_to_be_asked_for(ledger_url):
    Ledger(ledger_url).close()
    with pytest.raises(LedgerVersionError, match="--downgrade"):
        migrations.migrate(create_engine(ledger_url), "0001")


def _stamp(url: str, revision: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE alembic_version SET version_num = '{revision}'")
    engine.dispose()


def test_a_ledger_newer_than_the_program_is_refused_and_not_written(tmp_path):
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    ledger = Ledger(url)
    run = ledger.start_run("openai/x")
    ledger.close()
    _stamp(url, "9999")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    with pytest.raises(LedgerVersionError) as info:
        Ledger(url)
    assert info.value.exit_code == ExitCode.USAGE and "newer" in str(info.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sqlite3.connect(path).execute("SELECT id FROM runs").fetchall() == [(run.id,)]


@pytest.mark.slow  # subprocesses
def test_the_cli_refuses_a_newer_ledger_with_one_line_and_exit_2(tmp_path):
    (tmp_path / "config.toml").write_text('[ledger]\nurl = "sqlite:///ledger.db"\n[llm]\nmodel = "openai/x"\napi_key_env = ""\n')
    Ledger(f"sqlite:///{tmp_path}/ledger.db").close()
    _stamp(f"sqlite:///{tmp_path}/ledger.db", "9999")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "ledger", "runs"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "newer than this program" in proc.stderr


@pytest.mark.slow  # subprocesses
def test_processes_opening_an_old_ledger_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "ledger.db"
    shutil.copy(FIXTURE, path)
    code = ("import sys, json; from pipeline.ledger.writer import Ledger; l = Ledger(sys.argv[1]); "
            "m = l.migration; print(json.dumps(None if m is None else [m.before, m.after]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, f"sqlite:///{path}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    did = [json.loads(out) for out, _ in results]
    assert did.count([migrations.BASELINE, migrations.HEAD]) == 1, did
    assert did.count(None) + did.count([migrations.HEAD, migrations.HEAD]) == 3, did
    assert sqlite3.connect(path).execute("SELECT version_num FROM alembic_version").fetchall() == [(migrations.HEAD,)]


@pytest.mark.slow  # subprocesses
def test_cli_migrate_sql_prints_the_sql_and_changes_nothing(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "ledger.db")
    (tmp_path / "config.toml").write_text('[ledger]\nurl = "sqlite:///ledger.db"\n[llm]\nmodel = "openai/x"\napi_key_env = ""\n')
    proc = subprocess.run([sys.executable, "-m", "pipeline", "ledger", "migrate", "--sql"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ALTER TABLE publications ADD COLUMN remote_id" in proc.stdout
    assert not inspect(create_engine(f"sqlite:///{tmp_path}/ledger.db")).has_table("alembic_version")

    proc = subprocess.run([sys.executable, "-m", "pipeline", "ledger", "migrate"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and f"→ {migrations.HEAD}" in proc.stdout, proc.stderr


@pytest.mark.slow  # subprocesses
def test_cli_check_reports_revision_integrity_and_broken_foreign_keys(tmp_path):
    (tmp_path / "config.toml").write_text('[ledger]\nurl = "sqlite:///ledger.db"\n[llm]\nmodel = "openai/x"\napi_key_env = ""\n')
    Ledger(f"sqlite:///{tmp_path}/ledger.db").close()
    proc = subprocess.run([sys.executable, "-m", "pipeline", "ledger", "check", "--json"], cwd=tmp_path,
                          capture_output=True, text=True)
    health = json.loads(proc.stdout)
    assert proc.returncode == 0 and health["revision"] == migrations.HEAD and health["schema"] == "current"
    assert "PRAGMA integrity_check: ok" in health["notes"]

    conn = sqlite3.connect(tmp_path / "ledger.db")  # foreign keys off by default in a plain connection
    conn.execute("INSERT INTO reports (run_id, body, created_at) VALUES ('no-such-run', 'x', '2026-01-01')")
    conn.commit()
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "pipeline", "ledger", "check"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1 and "reports row 1 points at a missing runs row" in proc.stderr


def test_postgres_check_verifies_indexes_with_amcheck(pg_url):
    ledger = Ledger(pg_url)
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS amcheck")
    health = check(ledger.engine)
    assert health.ok and health.backend == "postgresql", health
    assert any("amcheck verified" in n for n in health.notes)


def test_a_whole_run_on_a_postgresql_ledger(harness, pg_url):
    outcome, ledger = harness.run("honest", PIPELINE_LEDGER__URL=pg_url)
    assert outcome.exit_code == 0, outcome
    assert ledger.is_postgres
    facts = {f.capability: f.value for f in ledger.facts(outcome.run_id)}
    assert facts["register"].startswith("CT-") and facts["publish"].startswith("http://127.0.0.1")
    assert check(ledger.engine).ok


@pytest.mark.slow  # subprocesses
def test_opening_a_current_ledger_does_not_import_alembic(tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.db"
    Ledger(url).close()
    code = "import sys; from pipeline.ledger.writer import Ledger; Ledger(sys.argv[1]); print('alembic' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


@pytest.mark.slow  # subprocesses
def test_the_wheel_ships_the_revisions(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True)
    import zipfile

    names = zipfile.ZipFile(next(tmp_path.glob("pipeline-*.whl"))).namelist()
    for revision in migrations.known_revisions():
        assert any(n.startswith(f"pipeline/ledger/migrations/versions/{revision}_") for n in names), revision
    assert "pipeline/ledger/migrations/script.py.mako" in names and "pipeline/ledger/migrations/env.py" in names
