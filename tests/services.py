"""Real servers for the tests that need one (PostgreSQL today), and the rule for when one is absent.

A test that needs a server skips with one line naming it — on a laptop without it —
unless ``PIPELINE_REQUIRE_SERVICES=1`` (set by ``.ci/run``), which turns the skip
into a failure so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_ADMIN_URL = os.environ.get("PIPELINE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def missing(what: str, why: object, env: str = "PIPELINE_REQUIRE_SERVICES") -> None:
    """Skip (one line) or, when ``env`` is set, fail: ``what`` is not available."""
    message = f"{what} not available ({why}); set {env}=1 to make this a failure"
    if os.environ.get(env) == "1":
        pytest.fail(f"{what} required by {env}=1 but not available: {why}", pytrace=False)
    pytest.skip(message)


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test; its SQLAlchemy URL. Dropped afterwards."""
    try:
        import psycopg
    except ImportError as exc:  # the [postgres] extra is not installed
        missing("PostgreSQL driver psycopg", exc)
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        missing(f"PostgreSQL at {PG_ADMIN_URL}", str(exc).strip().splitlines()[0])
    name = f"pipeline_test_{secrets.token_hex(4)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        try:
            yield f"{base}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


REDIS_URL = os.environ.get("PIPELINE_TEST_REDIS", "redis://127.0.0.1:6379")
RABBITMQ_URL = os.environ.get("PIPELINE_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672//")


def broker_url(kind: str) -> str:
    """A reachable broker of ``kind`` (redis | rabbitmq), or skip/fail as ``missing`` says."""
    import socket
    from urllib.parse import urlsplit

    url = REDIS_URL if kind == "redis" else RABBITMQ_URL
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except OSError as exc:
        missing(f"{kind} at {parts.hostname}:{parts.port}", exc)
    if kind == "redis":  # a database of its own per test session, so queues of parallel runs never mix
        return f"{url}/{secrets.randbelow(14) + 1}"
    return url
