"""The operator's read commands: faithful, read-only, uncut, and honest about what they could not judge."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.ledger.writer import Ledger

from support import REPO

MARKUP = "Published at https://127.0.0.1:8765/posts/[/]x.html, [red]registered[/red] as CT-20260101-001 [bold]"


def invoke(*args: str, env: dict[str, str] | None = None, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), env=env, input=stdin, catch_exceptions=False)


@pytest.fixture
def markup_run(harness):
    """A ledger whose model said something full of Rich markup."""
    cfg = harness.config("honest")
    ledger = Ledger(cfg.ledger_url)
    run = ledger.start_run("openai/[bold]model")
    turn = ledger.add_turn(run.id, "assistant", MARKUP)
    ledger.record_claims(run.id, turn, [{"capability": "publish", "text": MARKUP, "value": "https://127.0.0.1:8765/posts/[/]x.html",
                                         "status": "unbacked"}])
    ledger.finish_run(run.id, "hallucination", 3, "still [/] hallucination")
    ledger.close()
    return harness.dir / "config.toml", run.id


# --- item 2: model text is shown exactly, never read as markup --------------------------

def test_diff_and_show_print_model_text_exactly(markup_run):
    path, run_id = markup_run
    diff = invoke("ledger", "diff", "--config", str(path))
    assert diff.exit_code == 1, diff.output  # 1 = hallucinations found, not a crash
    assert MARKUP in diff.output
    show = invoke("ledger", "show", run_id, "--config", str(path))
    assert show.exit_code == 0, show.output
    assert MARKUP in show.output and "openai/[bold]model" in show.output and "still [/] hallucination" in show.output


# --- item 3: outside a project, say so; never create a ledger ----------------------------

@pytest.mark.parametrize("args", [("ledger", "diff"), ("ledger", "runs"), ("ledger", "show"), ("status",), ("report",),
                                  ("stats",)])
def test_read_commands_outside_a_project_create_nothing(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIPELINE_CONFIG", raising=False)
    result = invoke(*args)
    assert result.exit_code == 2 and "no config file" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [("ledger", "diff"), ("ledger", "runs"), ("ledger", "show"), ("report",), ("stats",)])
def test_read_commands_without_a_ledger_say_so(harness, args):
    path = harness.dir / "config.toml"
    harness.config("honest")
    result = invoke(*args, "--config", str(path))
    assert result.exit_code == 2 and "no ledger at" in result.output
    assert not (harness.dir / "ledger.db").exists()


def test_status_before_any_run_creates_no_ledger(harness):
    harness.config("honest")
    result = invoke("status", "--json", "--config", str(harness.dir / "config.toml"))
    assert json.loads(result.stdout)[0]["last_run"] is None
    assert not (harness.dir / "ledger.db").exists()


# --- item 4: values people copy are never cut ---------------------------------------------

def test_run_ids_and_next_run_survive_narrow_and_piped_output(harness):
    harness.run("honest")
    harness.run("silent")
    path = str(harness.dir / "config.toml")
    ids = [r["run_id"] for r in json.loads(invoke("ledger", "runs", "--json", "--config", path).stdout)]
    table = invoke("ledger", "runs", "--config", path, env={"COLUMNS": "40"})
    first = [line.split()[0] for line in table.stdout.splitlines()[1:] if line.strip()]  # awk '{print $1}'
    assert first == ids
    assert invoke("ledger", "show", first[0], "--config", path).exit_code == 0

    next_run = json.loads(invoke("status", "--json", "--config", path).stdout)[0]["next_run"]
    narrow = invoke("status", "--config", path, env={"COLUMNS": "40"})
    assert next_run in narrow.stdout and ids[0] in narrow.stdout


# --- item 5: looking at a report does not send it -----------------------------------------

def test_report_is_read_only_unless_sent(harness):
    from support import Recorder

    rec = Recorder()
    try:
        extra = f'\n[report]\nwebhook_url = "{rec.base}/report"\nmarkdown_dir = "reports"\n'
        harness.run("honest", extra)
        path = str(harness.dir / "config.toml")
        before = sorted(p.name for p in (harness.dir / "reports").glob("daily-*"))
        hits = len(rec.hits)
        looked = invoke("report", "--json", "--config", path)
        assert looked.exit_code == 0 and json.loads(looked.stdout)["delivered_to"] == []
        assert sorted(p.name for p in (harness.dir / "reports").glob("daily-*")) == before == []
        assert len(rec.hits) == hits
        sent = invoke("report", "--json", "--send", "--config", path)
        assert len(json.loads(sent.stdout)["delivered_to"]) == 2 and len(rec.hits) == hits + 1
        assert list((harness.dir / "reports").glob("daily-*.md"))
    finally:
        rec.server.shutdown()


# --- item 6: help text ------------------------------------------------------------------------

def test_help_shows_toml_names_flags_version_and_h():
    run_help = invoke("run", "-h")
    assert run_help.exit_code == 0 and "[[channels]]" in run_help.output
    diff_help = invoke("ledger", "diff", "--help")
    assert re.search(r"--json\s+Machine-readable", diff_help.output) and "<bool>" not in diff_help.output
    version = invoke("--version")
    assert version.exit_code == 0 and re.fullmatch(r"pipeline \d+\.\d+\.\d+\S*\n", version.output)
    report_help = invoke("report", "-h").output
    assert "[register]" in report_help and "[report]" in report_help


# --- item 7: ledger show ------------------------------------------------------------------------

def test_ledger_show_prints_results_once_totals_full_and_json(harness):
    outcome, ledger = harness.run("honest")
    path = str(harness.dir / "config.toml")
    by_option = invoke("ledger", "show", "--run", outcome.run_id, "--config", path)
    latest = invoke("ledger", "show", "--config", path)
    assert by_option.exit_code == 0 and by_option.stdout == latest.stdout
    text = by_option.stdout
    register = next(e for e in ledger.executions(outcome.run_id) if e.capability == "register")
    number = json.loads(register.result_json)["registration_no"]
    assert text.count(f'"registration_no": "{number}"') == 1  # once, not as execution and again as tool turn
    assert re.search(r"totals \d+ model calls \(\d+ turns, \d+ by capabilities\), \d+\+\d+ tokens", text)
    system = ledger.turns(outcome.run_id)[0].content
    assert len(system) > 400 and system not in text and "--full shows all" in text
    assert system.replace("\n", "\n   ") in invoke("ledger", "show", "--full", "--config", path).stdout  # indented, whole
    data = json.loads(invoke("ledger", "show", "--json", "--config", path).stdout)
    assert data["run"]["id"] == outcome.run_id and data["totals"]["model_turns"] >= 6
    assert data["totals"]["prompt_tokens"] == (sum(t["prompt_tokens"] or 0 for t in data["turns"] if t["role"] == "assistant")
                                               + sum(c["prompt_tokens"] or 0 for c in data["model_calls"]))


# --- item 8: claims check and ledger diff share verdicts; unjudged is not clean ------------

def test_claims_check_without_facts_is_not_clean(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("claims", "check", "The article was published at https://127.0.0.1:8765/posts/a.html.")
    assert result.exit_code == 1
    assert "? unjudged" in result.stdout and "not judged" in result.stderr
    assert invoke("claims", "check", "Nothing to see.").exit_code == 0


def test_mismatch_shows_the_recorded_value_in_both_commands(harness):
    outcome, ledger = harness.run("wrong_values")
    path = str(harness.dir / "config.toml")
    url = next(f.value for f in ledger.facts(outcome.run_id) if f.capability == "publish")
    diff = invoke("ledger", "diff", "--config", path)
    line = next(line for line in diff.stdout.splitlines() if "✗ mismatch publish" in line)
    assert f"(ledger: {url})" in line
    claimed = re.search(r"«(.*)»", line).group(1)
    check = invoke("claims", "check", claimed, "--run", outcome.run_id, "--config", path)
    assert check.exit_code == 1
    assert f"(ledger: {url})" in next(line for line in check.stdout.splitlines() if "✗ mismatch publish" in line)


# --- item 9: config.toml documents every key ------------------------------------------------

def _keys(model, prefix=()) -> set[tuple[str, ...]]:
    from pydantic import BaseModel

    out = set()
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = (*prefix, field.alias or name)
        ann = field.annotation
        if getattr(ann, "__origin__", None) is dict:
            out.add(key)  # a free-form table: its header (or an inline table) documents it
        elif isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _keys(ann, key)
        else:
            out.add(key)
    return out


def test_config_toml_documents_every_key():
    from pipeline.config import ChannelConfig, Config

    text = (REPO / "config.toml").read_text(encoding="utf-8")
    # Commented-out examples count: "# key = …" under its [section] header (or "# [section]").
    uncommented = "\n".join(re.sub(r"^#\s?(?=\[|\w+\s*=)", "", line) for line in text.splitlines())
    documented: set[tuple[str, ...]] = set()
    section: tuple[str, ...] = ()
    for line in uncommented.splitlines():
        if m := re.match(r"^\[\[?([\w.]+)\]\]?", line):
            section = tuple(m.group(1).split("."))
            documented.add(section)
        elif m := re.match(r"^(\w+)\s*=", line):
            documented.add((*section, m.group(1)))
    wanted = {k for k in _keys(Config) if k[0] != "channels"} | {("channels", *k) for k in _keys(ChannelConfig)}
    assert sorted(wanted - documented) == []
    from pipeline import config as config_mod

    tomllib.loads(text)
    config_mod.load(REPO / "config.toml", environ={})  # and it is still a valid config


# --- item 10: status says whether the daemon is alive ------------------------------------

def test_status_says_whether_the_daemon_runs(harness):
    import os

    from pipeline.ledger.locks import hold

    harness.run("honest")
    path = str(harness.dir / "config.toml")
    assert json.loads(invoke("status", "--json", "--config", path).stdout)[0]["daemon"]["running"] is False
    assert "daemon not running" in invoke("status", "--config", path).stdout
    with hold(harness.dir / "var" / "daemon.lock", "the daemon's job store"):
        row = json.loads(invoke("status", "--json", "--config", path).stdout)[0]
        assert row["daemon"] == {"running": True, "pid": os.getpid(), "lock": str(harness.dir / "var" / "daemon.lock")}
        assert f"daemon running (pid {os.getpid()})" in invoke("status", "--config", path).stdout


# --- cold start: the read commands import neither SQLAlchemy nor Rich for --help / --json ---

@pytest.mark.slow  # CLI subprocesses
def test_read_commands_do_not_import_sqlalchemy_or_litellm(harness):
    harness.run("honest")
    path = str(harness.dir / "config.toml")
    for args in (("--help",), ("ledger", "diff", "--json"), ("ledger", "runs"), ("ledger", "show", "--json"),
                 ("stats", "--json")):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline", *args, "--config", path]
                              if args != ("--help",) else [sys.executable, "-X", "importtime", "-m", "pipeline", "--help"],
                              capture_output=True, text=True, timeout=60)
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time")}
        assert "pipeline.cli" in imported, proc.stderr[-500:]
        assert not imported & {"sqlalchemy", "sqlmodel", "litellm"}, args
        if args == ("--help",) or "--json" in args:
            assert "rich" not in imported, args


@pytest.mark.slow
def test_status_and_report_read_without_sqlalchemy(harness):
    """status and report read through pipeline.ledger.reader, as the other read commands do: no SQLAlchemy, no litellm."""
    harness.run("honest")
    path = str(harness.dir / "config.toml")
    for args in (("status", "--json"), ("status",), ("report", "--json"), ("report",)):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline", *args, "--config", path],
                              capture_output=True, text=True, timeout=60)
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time")}
        assert "pipeline.cli" in imported and proc.returncode in (0, 1), proc.stderr[-500:]
        assert not imported & {"sqlalchemy", "sqlmodel", "litellm", "httpx"}, args


def test_read_models_are_frozen_dataclasses_in_step_with_reconciliation(harness):
    import dataclasses

    from pipeline.ledger.reader import reader_for
    from pipeline.publishing import settle as reconcile
    from pipeline.views import reports
    from pipeline.views.diff import run_diff
    from pipeline.views.stats import model_stats
    from pipeline.views.status import channel_status

    # The read model repeats this constant to stay free of SQLAlchemy; it must not drift.
    assert reports.RECONCILE_CALL_PREFIX == reconcile.CALL_PREFIX
    outcome, ledger = harness.run("honest")
    for value in (reports.run_summary(ledger, outcome.run_id), run_diff(ledger, outcome.run_id),
                  reports.daily_summary(ledger, outcome_day(ledger, outcome.run_id), "UTC"),
                  channel_status(harness.config("honest"))[0], model_stats(reader_for(ledger))[0]):
        assert dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.run_id = "x"  # type: ignore[misc]
        json.dumps(value.as_dict())


def outcome_day(ledger, run_id):
    return ledger.get_run(run_id).started_at.date()
