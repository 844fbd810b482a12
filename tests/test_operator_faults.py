"""Faults an operator meets (issue 50): a ledger that cannot be reached, and the small defects beside it.

In-process (CliRunner): a traceback would raise here (``catch_exceptions=False``) instead of passing.
"""

from __future__ import annotations

import signal
from pathlib import Path
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


# --- a page that cannot be verified is withdrawn, and its publication reused --------------------------------


class _Answers:
    """A loopback HTTP server that answers every request with ``status``, or serves ``directory``."""

    def __init__(self, status: int = 404, directory: Path | None = None) -> None:
        import functools
        import threading
        from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

        class Fixed(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD  # noqa: N815  (http.server's name)

            def log_message(self, *args: Any) -> None:
                pass

        handler: Any = functools.partial(SimpleHTTPRequestHandler, directory=str(directory)) if directory else Fixed
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _publications(ledger) -> list:
    from sqlmodel import select

    from pipeline.ledger.models import Publication

    with ledger.read() as s:
        return list(s.exec(select(Publication)).all())


def test_three_runs_against_a_404_site_leave_no_page_and_one_pending_publication_then_one_page(harness):
    site = harness.dir / "site"
    answers_404 = _Answers(404)
    try:
        for _ in range(3):
            outcome, ledger = harness.run("honest", PIPELINE_PUBLISH_LOCAL__BASE_URL=answers_404.url)
            assert outcome.exit_code == 4 and "could not be verified" in (outcome.error or ""), outcome
            assert sorted(p.name for p in (site / "posts").glob("*.html")) == []
            index = (site / "index.html").read_text(encoding="utf-8")
            assert "posts/" not in index and "<entry>" not in (site / "feed.xml").read_text(encoding="utf-8")
            [pub] = _publications(ledger)
            assert pub.status == "pending" and "withdrawn" in (pub.verification or "")
            assert pub.run_id == outcome.run_id  # each run took the one publication over
            ledger.close()
    finally:
        answers_404.stop()
    good = _Answers(directory=site)
    try:
        outcome, ledger = harness.run("honest", PIPELINE_PUBLISH_LOCAL__BASE_URL=good.url)
    finally:
        good.stop()
    assert outcome.exit_code == 0, outcome
    assert len(list((site / "posts").glob("*.html"))) == 1
    [pub] = _publications(ledger)
    assert pub.status == "verified" and pub.run_id == outcome.run_id and pub.url.startswith(good.url)
    assert (site / "index.html").read_text(encoding="utf-8").count("posts/") == 1


def test_a_refused_connection_is_never_a_verification(tmp_path):
    """Nothing listens at a base_url the local site cannot serve itself (a privileged port): unverified."""
    from pipeline.config import PublishConfig
    from pipeline.publishing.publish import verify_published
    from pipeline.publishing.publishers import Published
    from pipeline.publishing.publishers.local import LocalSitePublisher

    site = LocalSitePublisher(tmp_path / "site", "http://127.0.0.1:9")
    published = site.publish(key="k", slug="a", title="A", body_markdown="Some text.", content_hash="h")
    assert isinstance(published, Published)
    problem = verify_published(PublishConfig(verify_timeout_s=1), site, published, "h")
    assert problem is not None and "ConnectError" in problem


def test_the_local_site_not_being_served_is_served_for_its_check(tmp_path):
    """A free loopback port: the check's answer comes over HTTP from the site's own handler, the page whole."""
    import socket

    from pipeline.config import PublishConfig
    from pipeline.publishing.publish import verify_published
    from pipeline.publishing.publishers.local import LocalSitePublisher

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    site = LocalSitePublisher(tmp_path / "site", f"http://127.0.0.1:{port}")
    published = site.publish(key="k", slug="a", title="A", body_markdown="Some text.", content_hash="h")
    assert verify_published(PublishConfig(verify_timeout_s=2), site, published, "h") is None
    assert not list((tmp_path / "site").glob("*.pid"))  # and nothing is left listening: the port is free again
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the closed server's port may be in TIME_WAIT
        again.bind(("127.0.0.1", port))


# --- a held article is a business state --------------------------------------------------------------------

UNDER_THE_PASS_MARK = {"PIPELINE_HUMANIZE__THRESHOLD": "99"}
MANUAL_REVIEW = '[publish]\nreview = "manual"\npreview_dir = "preview"\n'


@pytest.mark.parametrize("how", ["under the pass mark", "manual review"])
def test_a_held_article_is_awaiting_review_with_its_own_exit_code_never_failed(harness, how):
    import json

    if how == "manual review":
        outcome, ledger = harness.run("honest", MANUAL_REVIEW)
    else:
        outcome, ledger = harness.run("honest", **UNDER_THE_PASS_MARK)
    ledger.close()
    path = str(harness.dir / "config.toml")
    env = UNDER_THE_PASS_MARK if how != "manual review" else {}
    human = CliRunner().invoke(app, ["status", "--config", path], env=env, catch_exceptions=False)
    assert human.exit_code == 8, human.output  # ExitCode.AWAITING_REVIEW, as `pipeline run` gives a manual review
    assert "awaiting review" in human.output and "failed" not in human.output
    [row] = json.loads(CliRunner().invoke(app, ["status", "--json", "--config", path], env=env).stdout)
    assert row["health"] == "awaiting_review" and row["failed"] is False and row["last_run"] == outcome.run_id


def test_metrics_report_and_alerts_say_held_not_failed(harness, monkeypatch):
    from pipeline.runtime import alerts
    from pipeline.views.metrics import LedgerCollector
    from pipeline.views.reports import daily_summary, render_daily

    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(alerts.Alerter, "alert", lambda self, channel, run_id, outcome, detail: sent.append((outcome, detail)))
    outcome, ledger = harness.run("honest", **UNDER_THE_PASS_MARK)
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)  # the run's own record and code are unchanged
    assert [o for o, _ in sent] == ["held (exit 4)"]
    statuses = {s.labels["status"] for m in LedgerCollector(ledger.url).collect() if m.name == "pipeline_runs"
                for s in m.samples}
    assert statuses == {"held"}
    from datetime import datetime, timezone

    from pipeline.ledger.reader import LedgerReader

    reader = LedgerReader(ledger.url)
    summary = daily_summary(reader, datetime.now(timezone.utc).date(), "UTC")
    reader.close()
    assert summary.failures == [] and [h.run_id for h in summary.held] == [outcome.run_id]
    assert "- Held for review: 1" in render_daily(summary) and "- Failures: 0" in render_daily(summary)


# --- the small defects --------------------------------------------------------------------------------------


def test_init_after_a_global_config_writes_that_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIPELINE_CONFIG", "restored-after-the-test")
    monkeypatch.delenv("PIPELINE_CONFIG")  # the callback sets it: monkeypatch puts the environment back
    result = CliRunner().invoke(app, ["--config", "x.toml", "init"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "x.toml").exists() and not (tmp_path / "config.toml").exists()


@pytest.mark.parametrize("args", [[], ["ledger"], ["review"], ["claims"]])
def test_a_group_without_a_command_prints_its_help_and_exits_0(args):
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0 and "Usage:" in result.output and "Commands" in result.output


def test_a_switch_is_true_or_false_not_yes(tmp_path):
    from pipeline import config as config_mod
    from pipeline.errors import ConfigError

    path = tmp_path / "config.toml"
    path.write_text('[agent]\nhallucination_guard = "yes"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[agent\] hallucination_guard: expected true or false, got 'yes'"):
        config_mod.load(path, environ={})
    path.write_text("[agent]\nhallucination_guard = false\n", encoding="utf-8")
    assert config_mod.load(path, environ={}).agent.hallucination_guard is False
    assert config_mod.load(path, environ={"AGENT_HALLUCINATION_GUARD": "1"}).agent.hallucination_guard is True


def test_an_unknown_section_from_the_environment_is_named_as_the_variable(tmp_path):
    from pipeline import config as config_mod
    from pipeline.errors import ConfigError

    path = tmp_path / "config.toml"
    path.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        config_mod.load(path, environ={"PIPELINE_AGNT__MAX_TURNS": "3"})
    assert str(caught.value).startswith("environment PIPELINE_AGNT__MAX_TURNS=3: agnt: unknown key; did you mean 'agent'")
    assert str(path) not in str(caught.value)


@pytest.mark.parametrize("text", ["", "# only a comment\n\n   \n", "title,angle\n"])
def test_a_backlog_without_a_topic_is_one_line_and_exit_2(tmp_path, text):
    from pipeline import config as config_mod
    from pipeline.errors import ConfigError
    from pipeline.run import validate

    backlog = tmp_path / ("topics.csv" if "," in text else "topics.txt")
    backlog.write_text(text, encoding="utf-8")
    _project(tmp_path, "sqlite:///ledger.db")
    cfg = config_mod.load(tmp_path / "config.toml", environ={"PIPELINE_TOPIC__BACKLOG": str(backlog)})
    with pytest.raises(ConfigError, match="holds no topics") as caught:
        validate.upfront(cfg)
    assert caught.value.exit_code == 2 and "\n" not in str(caught.value)


def test_a_stuck_runs_message_is_never_cut_mid_word():
    from pipeline.errors import AgentStuckError

    error = "the draft failed its checks: " + " ".join(["call draft again with the topic_id"] * 12)
    message = str(AgentStuckError({"publish"}, "draft", error, 3))
    quoted = message.split("error (", 1)[1].rsplit(")", 1)[0]
    assert quoted.endswith("…") and len(quoted) <= 200
    assert quoted[:-1].split()[-1] in error.split()  # the last word is whole


@pytest.mark.slow
def test_sigpipe_ends_output_quietly_with_the_commands_own_status(harness):
    import subprocess
    import sys

    outcome, ledger = harness.run("honest")
    assert outcome.exit_code == 0
    ledger.close()
    path = harness.dir / "config.toml"
    for command in ("ledger diff", "ledger show --full", "ledger runs"):
        shell = f"{sys.executable} -m pipeline {command} --config {path} | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}"
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == "0", (command, done.stdout, done.stderr)
        assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_run_json_is_one_object_and_the_failure_line_is_said_once(tmp_path, fake_llm):
    import json
    import os
    import subprocess
    import sys

    from support import KEY_ENV, write_config

    path = write_config(tmp_path, fake_llm.api_base, "prose")  # the incident: a hallucinating model, exit 3
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", "--json", "--config", str(path)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, KEY_ENV: "sk-test-not-a-real-key"})
    assert done.returncode == 3, done.stderr
    data = json.loads(done.stdout)  # the whole of stdout: one object
    assert data["status"] == "hallucination" and data["exit_code"] == 3 and data["run_id"].startswith("r")
    assert {"topic", "title", "score", "url", "registration_no", "nudges", "hallucinations_caught"} <= set(data)
    assert data["error"] and done.stderr.count(data["error"][:60]) == 1, done.stderr  # once, not twice
    assert f"pipeline ledger diff --run {data['run_id']}" in done.stderr


def _status(path) -> tuple[int, str, dict]:
    import json

    human = CliRunner().invoke(app, ["status", "--config", str(path)], catch_exceptions=False)
    [row] = json.loads(CliRunner().invoke(app, ["status", "--json", "--config", str(path)]).stdout)
    return human.exit_code, human.output, row


def test_a_daemon_that_died_is_reported_whatever_the_scheduler_says(harness):
    from datetime import timedelta

    from pipeline.ledger.models import Daemon
    from pipeline.ledger.utc import utcnow

    cfg = harness.config("honest")  # [daemon] scheduler: the default, "manual"
    assert cfg.daemon.scheduler == "manual"
    from pipeline.ledger.writer import Ledger

    ledger = Ledger(cfg.ledger_url)
    me = ledger.daemon_started()
    with ledger.write() as s:  # killed an hour ago: no stop recorded, the beats stopped
        row = s.get(Daemon, me)
        row.started_at = row.beat_at = utcnow() - timedelta(hours=1)
        s.add(row)
    ledger.close()
    code, output, row = _status(harness.dir / "config.toml")
    assert code == 3 and row["health"] == "scheduler_down" and row["scheduler"]["alive"] is False, output
    assert "died without stopping" in row["scheduler"]["reason"] and "manual" in row["scheduler"]["reason"]
    _outcome, ledger = harness.run("honest")  # a run since: the channels are being run, by hand
    ledger.close()
    code, output, row = _status(harness.dir / "config.toml")
    assert row["health"] != "scheduler_down" and code != 3, output


def test_a_daemon_starting_is_starting_not_absent(harness):
    from pipeline.ledger.locks import hold

    cfg = harness.config("honest", extra='[daemon]\nscheduler = "daemon"\n')
    with hold(cfg.state_dir / "daemon.lock", "the daemon's job store"):  # what a starting daemon holds first
        code, output, row = _status(harness.dir / "config.toml")
    assert "no daemon has started" not in output and "is starting" in row["scheduler"]["reason"], output
    assert row["scheduler"]["alive"] is None and code != 3


# --- the README, read from the top --------------------------------------------------------------------------


def test_the_readme_starts_with_the_quick_start_and_its_outcome():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    top = "\n".join(readme.splitlines()[:60])
    for needed in ("## Quick start", "make run", "make test", "Exit **0**", "var/site/posts/", "**4**",
                   "held for review"):
        assert needed in top, needed
    assert "Both need only" not in readme  # make test installs Debian packages as root: said so
    assert "threshold 90.2" not in readme and "pipeline/guard.py" not in readme
    assert "| `bench/bench_brainstorm.py` |" not in readme and "| `bench/bench_local.py` |" not in readme
    assert not (REPO / "pipeline" / "guard.py").exists() and (REPO / "pipeline" / "run" / "guard.py").exists()
    history = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "## Articles on the embedded model" in history and "d752838" in history


def test_a_repeated_failure_is_counted_as_failures_not_as_nudges(capsys):
    """'nudge 2/3' (failures of one call out of stuck_after) was printed beside the ledger's 'nudges 1'."""
    from pipeline.cli import _Progress
    from pipeline.run.events import Nudge
    from pipeline.states import GuardKind

    _Progress().nudged(Nudge(GuardKind.REPEATED_FAILURE, 2, 3, missing=("draft",)))
    _Progress().nudged(Nudge(GuardKind.HALLUCINATION, 1, 2, missing=("publish",)))
    printed = capsys.readouterr().out
    assert "the same failure 2 times, the run ends stuck at 3" in printed and "nudge 2/3" not in printed
    assert "nudge 1/2" in printed


def test_the_embedded_weights_are_one_copy_per_user_unless_the_state_dir_keeps_its_own(tmp_path, monkeypatch):
    """Each `pipeline init`ed project assembled its own 1.6 GB of weights under its state_dir."""
    from pipeline.model.local import assets

    monkeypatch.delenv("PIPELINE_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a, b = tmp_path / "a" / "var", tmp_path / "b" / "var"
    assert assets.models_dir(a) == assets.models_dir(b) == tmp_path / "cache" / "pipeline" / "models"
    (b / "models").mkdir(parents=True)  # a state_dir that already holds its models keeps them
    assert assets.models_dir(b) == b / "models"
    monkeypatch.setenv("PIPELINE_MODELS_DIR", str(tmp_path / "shared"))
    assert assets.models_dir(a) == assets.models_dir(b) == tmp_path / "shared"
