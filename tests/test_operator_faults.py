"""Faults an operator meets (issue 50): a ledger that cannot be reached, and the small defects beside it.

In-process (CliRunner): a traceback would raise here (``catch_exceptions=False``) instead of passing.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.cli import app

from support import OFFLINE_API_BASE, REPO

# Port 1 on the loopback: nothing listens, the connection is refused at once (no service needed).
DOWN = "postgresql+psycopg://x@127.0.0.1:1/db"

# Every command that opens the ledger, with the arguments that make it do so.
OPENS_THE_LEDGER: dict[str, list[str]] = {
    "run": [],
    "daemon": [],
    "status": [],
    "report": [],
    "stats": [],
    "doctor": [],
    "score": ["--article", "1"],
    "ledger diff": [],
    "ledger runs": [],
    "ledger show": [],
    "ledger check": [],
    "ledger migrate": [],
    "claims check": ["no claims here", "--run", "r1"],
    "review list": [],
    "review show": ["r1"],
    "review approve": ["r1", "--by", "editor"],
    "review reject": ["r1", "--by", "editor", "--reason", "no"],
}
# And why each other command is left out, so that a new command must be placed in one list or the other.
NEVER_OPENS_IT = {
    "help": "prints help",
    "init": "writes a config",
    "serve": "serves the site's directory",
    "worker": 'only with [engine] kind = "celery"; its broker, not the ledger, comes first',
    "ledger backup": "refuses a PostgreSQL ledger (pg_dump) before opening it",
}


def _commands(group: Any, prefix: str = "") -> set[str]:
    names = set()
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group
            names |= _commands(cmd, f"{prefix}{name} ")
        else:
            names.add(f"{prefix}{name}")
    return names


@pytest.fixture
def signals_kept():
    """``run`` and ``daemon`` install SIGTERM/SIGINT handlers: give pytest its own back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def _project(tmp_path, url: str) -> None:
    (tmp_path / "config.toml").write_text(f"""
[llm]
model = "openai/honest"
api_base = "{OFFLINE_API_BASE}"
api_key_env = ""
[ledger]
url = "{url}"
[topic]
backlog = "{REPO / 'topics.txt'}"
[publish.local]
dir = "site"
""", encoding="utf-8")


def test_the_command_list_is_walked_whole():
    assert _commands(typer_group()) == set(OPENS_THE_LEDGER) | set(NEVER_OPENS_IT)


def typer_group() -> Any:
    import typer.main

    return typer.main.get_command(app)


@pytest.mark.parametrize("command", sorted(OPENS_THE_LEDGER))
def test_an_unreachable_postgresql_is_one_line_naming_the_cause_and_exit_2(tmp_path, monkeypatch, signals_kept, command):
    _project(tmp_path, DOWN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIPELINE_CONFIG", raising=False)
    monkeypatch.delenv("PIPELINE_DAEMON_CONFIG", raising=False)
    result = CliRunner().invoke(app, [*command.split(), *OPENS_THE_LEDGER[command], "--config", "config.toml"],
                                catch_exceptions=False)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    # The ledger (its password hidden), host and port, and the driver's reason.
    assert lines[0].startswith("error: ledger postgresql+psycopg://x@127.0.0.1:1/db: cannot "), lines[0]
    assert '"127.0.0.1", port 1 failed: Connection refused' in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]  # no var/, no site/, no lock file


def test_the_password_in_an_unreachable_ledgers_url_is_never_shown(tmp_path, monkeypatch):
    _project(tmp_path, "postgresql+psycopg://x:s3cr3t-pw@127.0.0.1:1/db")
    result = CliRunner().invoke(app, ["status", "--config", str(tmp_path / "config.toml")], catch_exceptions=False)
    assert result.exit_code == 2 and "s3cr3t-pw" not in result.output
    assert "x:***@127.0.0.1:1/db" in result.output


@pytest.mark.parametrize("command", ["run", "ledger migrate", "review approve", "doctor", "daemon"])
def test_a_sqlite_ledger_where_no_file_can_be_made_is_one_line_and_exit_2(tmp_path, monkeypatch, signals_kept, command):
    _project(tmp_path, "sqlite:////proc/ledger.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIPELINE_DAEMON_CONFIG", raising=False)
    result = CliRunner().invoke(app, [*command.split(), *OPENS_THE_LEDGER[command], "--config", "config.toml"],
                                catch_exceptions=False)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ledger sqlite:////proc/ledger.db: cannot "), lines[0]
    assert "/proc/ledger.db" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]
