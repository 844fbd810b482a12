"""End to end: the real ``pipeline`` executable, real litellm, the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import KEY_ENV, REPO, write_config

pytestmark = pytest.mark.slow


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, KEY_ENV: "sk-test-not-a-real-key", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, env=full_env, input=stdin,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def site(tmp_path, fake_llm):
    def configure(scenario: str) -> Path:
        return write_config(tmp_path, fake_llm.api_base, scenario)
    return configure


def test_incident_replayed_end_to_end(tmp_path, site):
    cfg = site("prose")
    run = cli("run", "--config", str(cfg), cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert not (tmp_path / "site" / "posts").exists() or not list((tmp_path / "site" / "posts").iterdir())
    assert "hallucination" in run.stdout + run.stderr
    assert "pipeline ledger diff --run" in run.stderr

    diff = cli("ledger", "diff", "--json", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 1
    data = json.loads(diff.stdout)
    assert data["status"] == "hallucination" and data["facts"] == []
    values = {(h["capability"], h["value"]) for h in data["hallucinations"]}
    assert ("publish", "https://domain/item/fake-id") in values
    assert ("register", "CT-20260922-001") in values
    assert ("humanize", "82") in values
    assert all(h["status"] == "unbacked" for h in data["hallucinations"])
    assert set(data) >= {"run_id", "status", "claims", "facts", "hallucinations"}

    human = cli("ledger", "diff", "--config", str(cfg), cwd=tmp_path)
    assert human.returncode == 1 and "fake-id" in human.stdout and "unbacked" in human.stdout


def test_honest_model_publishes_one_page_with_a_clean_diff(tmp_path, site):
    cfg = site("honest")
    run = cli("run", "--config", str(cfg), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    pages = list((tmp_path / "site" / "posts").glob("*.html"))
    assert len(pages) == 1
    for step in ("topic", "draft", "humanize", "publish", "register", "report"):
        assert step in run.stdout
    assert "CT-" in run.stdout

    diff = cli("ledger", "diff", "--json", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout
    data = json.loads(diff.stdout)
    assert data["hallucinations"] == [] and data["status"] == "done"
    assert {f["capability"] for f in data["facts"]} == {"topic", "draft", "humanize", "publish", "register", "report"}
    url = next(f["value"] for f in data["facts"] if f["capability"] == "publish")
    assert url.endswith(pages[0].name)

    runs = cli("ledger", "runs", "--json", "--config", str(cfg), cwd=tmp_path)
    assert json.loads(runs.stdout)[0]["status"] == "done"
    show = cli("ledger", "show", data["run_id"], "--config", str(cfg), cwd=tmp_path)
    assert show.returncode == 0 and "publish" in show.stdout and "fake-honest-v1" in show.stdout


def test_recovering_model_exits_0_with_exactly_one_publication(tmp_path, site):
    cfg = site("recover")
    run = cli("run", "--config", str(cfg), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "nudge 1/2" in run.stdout
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 1
    # The caught hallucination stays on the record.
    diff = cli("ledger", "diff", "--json", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 1
    assert json.loads(diff.stdout)["status"] == "done"


def test_config_from_environment_variable(tmp_path, site):
    cfg = site("silent")
    run = cli("run", cwd=REPO, env={"PIPELINE_CONFIG": str(cfg)})
    assert run.returncode == 4


def test_bad_config_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("[agent]\nmax_turns = 'many'\n")
    run = cli("run", "--config", str(bad), cwd=tmp_path)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "[agent] max_turns" in lines[0], run.stderr

    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[llm]\nmodle = 'x'\n")
    run = cli("run", "--config", str(unknown), cwd=tmp_path)
    assert run.returncode == 2 and "[llm] modle: unknown key" in run.stderr

    run = cli("run", "--config", str(tmp_path / "missing.toml"), cwd=tmp_path)
    assert run.returncode == 2 and "no such config file" in run.stderr


def test_missing_api_key_is_a_config_error_and_records_nothing(tmp_path, site):
    cfg = site("honest")
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    run = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", str(cfg)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and KEY_ENV in run.stderr
    assert not (tmp_path / "ledger.db").exists()


def test_env_override_of_a_config_key(tmp_path, site):
    cfg = site("honest")
    run = cli("run", "--config", str(cfg), cwd=tmp_path, env={"PIPELINE_LLM__MODEL": "openai/silent"})
    assert run.returncode == 4


def test_ledger_diff_without_runs_is_exit_2(tmp_path, site):
    cfg = site("honest")
    diff = cli("ledger", "diff", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 2 and "no ledger at" in diff.stderr
    from pipeline import config as config_mod
    from pipeline.ledger.writer import Ledger

    Ledger(config_mod.load(cfg, environ={}).ledger_url).close()  # an empty ledger
    diff = cli("ledger", "diff", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 2 and "no runs" in diff.stderr
    diff = cli("ledger", "diff", "--run", "nope", "--config", str(cfg), cwd=tmp_path)
    assert diff.returncode == 2


def test_claims_check(tmp_path):
    text = "文章已生成，拟人化评分 82 分，已发布至平台，链接 https://domain/item/fake-id，已登记到台账，登记号 CT-20260922-001。"
    run = cli("claims", "check", text, "--json", cwd=tmp_path)
    assert run.returncode == 1 and json.loads(run.stdout)["judged"] is False  # unjudged is not clean
    claims = {(c["capability"], c["value"]) for c in json.loads(run.stdout)["claims"]}
    assert claims >= {("publish", "https://domain/item/fake-id"), ("register", "CT-20260922-001"), ("humanize", "82"), ("draft", None)}

    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"publish": {"url": "https://domain/item/real"}, "humanize": {"score": 82}, "draft": {}}))
    run = cli("claims", "check", "-", "--facts", str(facts), "--json", cwd=tmp_path, stdin=text)
    assert run.returncode == 1
    verdicts = {(c["capability"], c["status"]) for c in json.loads(run.stdout)["claims"]}
    assert verdicts == {("publish", "mismatch"), ("register", "unbacked"), ("humanize", "verified"), ("draft", "verified")}


def _imports(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc.stderr


def test_diff_and_claims_check_do_not_import_litellm(tmp_path, site):
    cfg = site("honest")
    assert cli("run", "--config", str(cfg), cwd=tmp_path).returncode == 0
    for args in (("ledger", "diff", "--config", str(cfg)), ("claims", "check", "已发布")):
        trace = _imports(*args, cwd=tmp_path)
        assert "pipeline.cli" in trace
        assert "litellm" not in trace, args
