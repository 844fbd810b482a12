"""What operators rely on (issue 25), in-process: health rules, up-front refusals, config errors, help texts.

The same behaviours through real processes (a daemon, Debian's cron, a backup under load) are in
``test_operations_real.py``.
"""

from __future__ import annotations

import sqlite3
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline import config as config_mod
from pipeline.errors import ConfigError
from pipeline.ledger.writer import Ledger
from pipeline.run import validate
from pipeline.views.status import channel_status

from support import OFFLINE_API_BASE, REPO, write_config

# Imported where used: on the old code (bfdcbf6) each test then fails on what it checks, not at collection.
HEALTH_EXIT = {"ok": 0, "awaiting_review": 8, "failed": 1, "overdue": 1, "scheduler_down": 3}  # README, Health

NOW = datetime(2026, 12, 1, 12, 2, 30, tzinfo=timezone.utc)


def _cfg(tmp_path, daemon: str):
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest",
                        f'\n[daemon]\ncron = "*/5 * * * *"\noverdue_after_s = 60\nheartbeat_s = 10\n{daemon}\n')
    return config_mod.load(path, environ={})


def _daemon_row(cfg, started: datetime, beat: datetime, stopped: datetime | None = None) -> None:
    from pipeline.ledger.models import Daemon

    ledger = Ledger(cfg.ledger_url)
    with ledger.write() as s:
        s.add(Daemon(id=f"h:1:{started.timestamp()}", host="h", pid=1, started_at=started, beat_at=beat,
                     stopped_at=stopped))


# --- 1. health -------------------------------------------------------------------------------------

def test_a_tick_before_the_daemon_started_is_not_overdue(tmp_path):
    """Finding 1: right after a daemon starts, the tick it never saw does not fail the health check."""
    cfg = _cfg(tmp_path, 'scheduler = "daemon"')
    _daemon_row(cfg, started=NOW - timedelta(seconds=30), beat=NOW - timedelta(seconds=5))
    [row] = channel_status(cfg, now=NOW)  # the 12:00 tick fell 30 s before the daemon began
    assert not row.overdue and row.health == "ok" and HEALTH_EXIT[row.health] == 0


def test_a_tick_after_the_daemon_started_with_no_run_is_overdue(tmp_path):
    cfg = _cfg(tmp_path, 'scheduler = "daemon"')
    _daemon_row(cfg, started=NOW - timedelta(hours=1), beat=NOW - timedelta(seconds=5))
    [row] = channel_status(cfg, now=NOW)
    assert row.overdue and row.health == "overdue" and "2026-12-01T12:00:00+00:00 tick" in row.reason


def test_a_daemon_deployment_without_a_live_daemon_is_down(tmp_path):
    """Finding 1: a stopped daemon (or one that died: its beats stopped) is unhealthy, exit 3, with the reason."""
    cfg = _cfg(tmp_path, 'scheduler = "daemon"')
    _daemon_row(cfg, started=NOW - timedelta(hours=1), beat=NOW - timedelta(minutes=10))
    [row] = channel_status(cfg, now=NOW)
    assert row.health == "scheduler_down" and HEALTH_EXIT[row.health] == 3 and "died" in row.reason
    _daemon_row(cfg, started=NOW - timedelta(minutes=5), beat=NOW - timedelta(minutes=1), stopped=NOW - timedelta(minutes=1))
    [row] = channel_status(cfg, now=NOW)
    assert row.health == "scheduler_down" and "stopped at" in row.reason


def test_no_daemon_ever_is_down_and_manual_is_never_overdue(tmp_path):
    [row] = channel_status(_cfg(tmp_path, 'scheduler = "daemon"'), now=NOW)
    assert row.health == "scheduler_down" and "no daemon has started" in row.reason
    [row] = channel_status(_cfg(tmp_path, ""), now=NOW)  # the default: scheduler = "manual"
    assert row.health == "ok" and not row.overdue


def test_cron_counts_ticks_from_its_declared_start(tmp_path):
    before = _cfg(tmp_path, f'scheduler = "cron"\ncron_since = "{(NOW - timedelta(seconds=40)).isoformat()}"')
    assert channel_status(before, now=NOW)[0].health == "ok"
    after = _cfg(tmp_path, f'scheduler = "cron"\ncron_since = "{(NOW - timedelta(days=1)).isoformat()}"')
    assert channel_status(after, now=NOW)[0].health == "overdue"


def test_cron_without_its_start_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cron_since"):
        _cfg(tmp_path, 'scheduler = "cron"')


# --- 2. checkpoint ---------------------------------------------------------------------------------

def test_checkpoint_leaves_the_database_file_complete(tmp_path):
    """Finding 2: after checkpoint(), ledger.db alone (immutable, no WAL) holds every row."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    for _ in range(20):
        ledger.finish_run(ledger.start_run("m").id, "done", 0)
    assert (tmp_path / "ledger.db-wal").stat().st_size > 0
    assert ledger.checkpoint()
    assert (tmp_path / "ledger.db-wal").stat().st_size == 0
    con = sqlite3.connect(f"file:{tmp_path / 'ledger.db'}?immutable=1", uri=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 20


# --- 3/4. up front, one line, nothing recorded --------------------------------------------------------

def test_a_backlog_that_does_not_exist_is_refused(tmp_path):
    """Finding 3: a wrong backlog path is an error naming it, not a made-up topic."""
    path = write_config(tmp_path, OFFLINE_API_BASE, "honest", backlog=tmp_path / "nope.txt")
    with pytest.raises(ConfigError, match=r"\[topic\] backlog: no such file .*nope\.txt"):
        validate.upfront(config_mod.load(path, environ={}))


@pytest.mark.parametrize("model,hint", [
    ("gtp-4o-mini", "did you mean 'gpt-4o-mini'"),
    ("openai/gtp-4o-mini", "did you mean 'openai/gpt-4o-mini'"),
    ("opnai/gpt-4o-mini", "unknown provider 'opnai'; did you mean 'openai'"),
])
def test_an_unknown_model_is_one_line_with_did_you_mean(model, hint):
    """Finding 5: litellm's own model map, read as data (no litellm import): one line, a suggestion."""
    from pipeline.model import modelcheck

    litellm_before = "litellm" in sys.modules
    with pytest.raises(ConfigError) as exc:
        modelcheck.check(model, None)
    assert hint in str(exc.value) and "\n" not in str(exc.value)
    assert ("litellm" in sys.modules) == litellm_before


@pytest.mark.parametrize("model,api_base,enabled", [
    ("openai/gpt-4o-mini", None, True), ("gpt-4o-mini", None, True), ("deepseek/deepseek-chat", None, True),
    ("ollama/anything-i-pulled", None, True), ("openai/my-server-model", "http://127.0.0.1:8000/v1", True),
    ("local/qwen2.5-coder-1.5b", None, True), ("openai/brand-new-model", None, False),
])
def test_known_and_self_hosted_models_pass(model, api_base, enabled):
    from pipeline.model import modelcheck

    modelcheck.check(model, api_base, enabled)


def test_an_unknown_key_suggests_the_near_one(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[agent]\nmax_turn = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[agent\] max_turn: unknown key; did you mean 'max_turns'\?"):
        config_mod.load(path, environ={})


def test_an_env_override_that_does_not_parse_names_the_variable(tmp_path):
    """Finding 6: the error is the variable's, not the file's (which has no such key)."""
    path = tmp_path / "config.toml"
    path.write_text("[llm]\nmodel = \"openai/gpt-4o-mini\"\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        config_mod.load(path, environ={"PIPELINE_AGENT__MAX_TURNS": "abc"})
    message = str(exc.value)
    assert message.startswith("environment PIPELINE_AGENT__MAX_TURNS=abc: [agent] max_turns:")
    assert str(path) not in message


def test_require_refuses_without_a_config_and_says_where_it_looked(tmp_path, monkeypatch):
    """Finding 4: the acting commands never run on built-in defaults."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"looked for config.toml in {tmp_path}"):
        config_mod.require(None, environ={})
    with pytest.raises(ConfigError, match=r"\$PIPELINE_CONFIG"):
        config_mod.require(None, environ={"PIPELINE_CONFIG": str(tmp_path / "x.toml")})
    assert list(tmp_path.iterdir()) == []


def test_the_starter_config_is_the_shipped_one():
    from importlib.resources import files

    starter = files("pipeline") / "starter"
    assert (starter / "config.toml").read_text(encoding="utf-8") == (REPO / "config.toml").read_text(encoding="utf-8")
    assert (starter / "topics.txt").read_text(encoding="utf-8") == (REPO / "topics.txt").read_text(encoding="utf-8")
    # and the notes the backlog names, file for file
    shipped = sorted(p.relative_to(REPO / "notes") for p in (REPO / "notes").rglob("*.md"))
    assert shipped and shipped == sorted(Path(str(p)).relative_to(Path(str(starter / "notes")))
                                         for p in Path(str(starter / "notes")).rglob("*.md"))
    assert all((REPO / "notes" / p).read_text(encoding="utf-8") ==
               Path(str(starter / "notes" / p)).read_text(encoding="utf-8") for p in shipped)


# --- 7. CLI conventions ----------------------------------------------------------------------------------

def _commands():
    import typer

    from pipeline.cli import app

    def walk(cmd, path):
        yield path, cmd
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), ["pipeline"])


def test_every_option_is_described_and_defaults_read_as_values():
    """Finding 7: no option without a description, no "[default: -1; x>=0]", argument names in one style."""
    for path, cmd in _commands():
        ctx = cmd.context_class(cmd, info_name=path[-1])
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                assert p.help, f"{' '.join(path)} {p.opts[0]}: no description"
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        assert "{" not in usage and "[[" not in usage and usage.upper() == usage, (path, usage)
        text = cmd.get_help(ctx)
        assert "<" not in text.split("Options:")[-1].split("  -h, --help")[0].replace("<<", ""), (path, text)
        assert "[default: -1" not in text and "x>=0" not in text, path


def test_help_is_never_cut():
    """Finding 7: the command lists print each command's summary whole."""
    for path, cmd in _commands():
        if hasattr(cmd, "commands"):
            text = cmd.get_help(cmd.context_class(cmd, info_name=path[-1]))
            listed = text.split("Commands:")[1]
            assert "…" not in listed and "..." not in listed, (path, text)


def test_status_exit_codes_are_the_documented_ones():
    from pipeline.views.status import HEALTH_EXIT as codes  # noqa: N811  (the module's table, beside the README's)

    assert codes == HEALTH_EXIT


def test_long_lived_workers_checkpoint_their_ledgers(tmp_path):
    """Finding 2, workers: _resident.checkpoint_all (after each Celery run and at worker shutdown) folds the WAL back."""
    from pipeline.ops import _resident

    cfg = config_mod.load(write_config(tmp_path, OFFLINE_API_BASE, "honest"), environ={})
    ledger = _resident.ledger_for(cfg.ledger_url, cfg.ledger.busy_timeout_ms)
    ledger.finish_run(ledger.start_run("m").id, "done", 0)
    assert (tmp_path / "ledger.db-wal").stat().st_size > 0
    _resident.checkpoint_all()
    assert (tmp_path / "ledger.db-wal").stat().st_size == 0
