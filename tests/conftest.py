"""Shared fixtures: the model (in-process scripted, or the HTTP fake through litellm), ledgers, harnesses.

``harness`` runs scenarios on the in-process scripted model: no litellm, no
socket for the model, the real ledger. ``http_harness`` runs the same scenarios
through real litellm against the scripted OpenAI-compatible server on
127.0.0.1 (``fakellm``), for the end-to-end tier. Helpers shared by test
modules live in ``support.py`` (on sys.path via pytest's ``pythonpath``).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile

import pytest

from fakellm import FakeLLM
from services import postgres_database
from support import Harness

# No test may reach the internet, and litellm must not try to fetch its price list.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(proxy, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


# Test ledgers live under tmp_path, and the ledger commits with synchronous=FULL: an fsync each, milliseconds on
# a disk, nothing on tmpfs. Nothing a test writes has to outlive a power cut, so the temporary files go to
# /dev/shm when it is a tmpfs with room (unless TMPDIR or --basetemp says where).
def _tmpfs_tempdir() -> str | None:
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounted = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in fh)
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    room = st.f_bavail * st.f_frsize > 1 << 30
    return "/dev/shm" if mounted and room and os.access("/dev/shm", os.W_OK | os.X_OK) else None


if "TMPDIR" not in os.environ and (_shm := _tmpfs_tempdir()):
    tempfile.tempdir = _shm
# The suite scores with the stylometric baseline (no model load, in this process and in every CLI
# subprocess); tests/test_score_model.py is the tier that loads the real scoring model.
os.environ["PIPELINE_SCORER"] = "stylometric"

# Fixtures that need a service (PostgreSQL, a broker): a test using one is marked ``services``.
SERVICE_FIXTURES = {"pg_url"}
# Fixtures whose model runs through litellm over HTTP: a test using one is marked ``litellm`` (the end-to-end tier).
LITELLM_FIXTURES = {"fake_llm", "http_harness", "slow_llm"}


@pytest.fixture(scope="session")
def fake_llm():
    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database (skipped with one line when no server is reachable)."""
    with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def ledger_url(request, tmp_path):
    """The ledger URL on each backend the ledger supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/ledger.db"
    else:
        with postgres_database() as url:
            yield url


def pytest_generate_tests(metafunc):
    # A test module that sets LEDGER_BACKENDS = ("sqlite", "postgresql") runs each harness test on each.
    backends = getattr(metafunc.module, "LEDGER_BACKENDS", None)
    if backends and "ledger_backend" in metafunc.fixturenames:
        metafunc.parametrize("ledger_backend", [
            pytest.param(b, marks=pytest.mark.services) if b != "sqlite" else b for b in backends], indirect=True)


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SERVICE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.services)
        if LITELLM_FIXTURES & fixtures:
            item.add_marker(pytest.mark.litellm)


def pytest_collection_finish(session):
    # What is alive now (pipeline, SQLAlchemy, pydantic, the test modules and items) lives for the whole session:
    # frozen out of the collector's sight, each full collection walks only what the tests made since.
    gc.collect()
    gc.freeze()


# A test with one of these marks is outside the fast tier (make test-fast).
NOT_FAST = ("slow", "litellm", "services", "local", "wordpress")


@pytest.fixture(autouse=True)
def _python_subprocesses_are_slow(request, monkeypatch):
    """A fast-tier test may not start a Python process (the CLI, a daemon, a worker: seconds of imports each):
    one that does fails here and says to mark it ``slow``."""
    if any(request.node.get_closest_marker(m) for m in NOT_FAST):
        return
    real = subprocess.Popen.__init__

    def init(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        if argv and os.fspath(argv[0]) == sys.executable:
            raise AssertionError(f"{request.node.nodeid} starts a Python subprocess: mark it @pytest.mark.slow")
        real(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)


@pytest.fixture
def ledger_backend(request) -> str:
    return getattr(request, "param", "sqlite")


def _harness(tmp_path, monkeypatch, ledger_backend, fake):
    h = Harness(tmp_path, monkeypatch, fake)
    if ledger_backend == "postgresql":
        with postgres_database() as url:
            h.env["PIPELINE_LEDGER__URL"] = url
            yield h
    else:
        yield h


@pytest.fixture
def harness(tmp_path, monkeypatch, ledger_backend):
    """Scenarios on the in-process scripted model."""
    yield from _harness(tmp_path, monkeypatch, ledger_backend, None)


@pytest.fixture
def http_harness(tmp_path, fake_llm, monkeypatch, ledger_backend):
    """Scenarios through litellm, over HTTP, against the session's fake server."""
    yield from _harness(tmp_path, monkeypatch, ledger_backend, fake_llm)


# --- fresh SQLite ledgers without Alembic ---------------------------------------------------------------------
#
# Most tests open a new ledger, and running the eleven revisions through Alembic costs about 0.08 s each time,
# half of the fast tier. Here a new, empty SQLite ledger instead gets the schema that Alembic itself produced
# once this session: the statements recorded in a migrated template's sqlite_master, replayed in one
# BEGIN IMMEDIATE transaction (as migrate takes it). Anything else (PostgreSQL, another target, a ledger with
# tables, test_migrations.py, every subprocess) goes through Alembic.


@pytest.fixture(scope="session")
def _migrated_schema(tmp_path_factory) -> tuple[list[str], str]:
    from sqlalchemy import create_engine

    from pipeline.ledger import migrations

    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('template')}/ledger.db")
    migrations.migrate(engine)
    with engine.connect() as conn:
        statements = [row[0] for row in conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    engine.dispose()
    return statements, revision


@pytest.fixture(autouse=True)
def _fresh_ledgers_from_the_migrated_schema(request, monkeypatch):
    if request.node.module.__name__ == "test_migrations":
        yield
        return
    from pipeline.ledger import migrations

    statements, revision = request.getfixturevalue("_migrated_schema")
    alembic_migrate = migrations.migrate

    def migrate(engine, target="head", *, allow_downgrade=False):
        if engine.dialect.name != "sqlite" or target != "head":
            return alembic_migrate(engine, target, allow_downgrade=allow_downgrade)
        try:
            raw = engine.raw_connection()
        except Exception:  # no connection at all (a path that cannot hold a file): fail as Alembic's would
            return alembic_migrate(engine, target, allow_downgrade=allow_downgrade)
        db = raw.driver_connection
        isolation, db.isolation_level = db.isolation_level, None  # statements as written, no implicit BEGIN
        try:
            db.execute("BEGIN IMMEDIATE")
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                db.execute("ROLLBACK")  # not empty: Alembic decides (current, behind, legacy, newer)
                return alembic_migrate(engine, target, allow_downgrade=allow_downgrade)
            for sql in statements:
                db.execute(sql)
            db.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (revision,))
            db.execute("COMMIT")
        finally:
            db.isolation_level = isolation
            raw.close()
        return migrations.Migration(None, revision)

    monkeypatch.setattr(migrations, "migrate", migrate)
    yield
