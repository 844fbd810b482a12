"""The hosted-model path (issue 26): a run ends on business state in turns too; capabilities probed, not guessed.

In-process on the scripted model (``harness``) and through litellm against the HTTP fake (``http_harness``,
``fake_llm``); the same paths against a real llama.cpp server are in ``test_real_server.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline import config as config_mod
from pipeline.errors import ConfigError
from pipeline.ledger.reader import EngineReader
from pipeline.ledger.writer import Ledger
from pipeline.model.llm import ChatModel
from pipeline.views.stats import model_stats

from fakellm import FakeLLM
from support import KEY_ENV, TEST_KEY, write_config


def run_cli(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def assistant_turns(ledger, run_id):
    return [t for t in ledger.turns(run_id) if t.role == "assistant"]


def executed(ledger, run_id, capability):
    return [e for e in ledger.executions(run_id) if e.capability == capability]


# --- 1. a run ends on business state, in turns too --------------------------------------------------------

@pytest.mark.parametrize("scenario", ["keeps_going", "keeps_going_text"])
def test_no_turns_after_the_closing_message(harness, scenario):
    # The real 1.5B model behind llama.cpp re-ran topic for 17 turns after its report, until max_turns.
    outcome, ledger = harness.run(scenario)
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    turns = assistant_turns(ledger, outcome.run_id)
    assert len(turns) == 7  # six steps, one closing message
    assert len(executed(ledger, outcome.run_id, "topic")) == 1  # the call after the report was never run
    assert ledger.get_run(outcome.run_id).turns_after_done == 1
    closing = harness.requests[-1]
    assert closing.kind == "agent" and closing.tool_choice == "none"
    assert [r.tool_choice for r in harness.requests if r.kind == "agent"][:-1] == ["auto"] * 6


def test_an_honest_run_spends_one_closing_turn_and_stats_show_it(harness):
    outcome, ledger = harness.run("honest")
    assert outcome.exit_code == 0
    assert ledger.get_run(outcome.run_id).turns_after_done == 1
    # The closing message's claims are diffed like any final answer.
    assert {c.capability for c in ledger.claims(outcome.run_id)} >= {"publish", "register"}
    (row,) = model_stats(EngineReader(ledger.engine))
    assert (row.turns_after_done, row.turns_after_done_max) == (1, 1)


def test_a_false_closing_message_is_still_nudged(harness):
    # The work is done, but the closing message quotes a URL and number the ledger never recorded.
    outcome, ledger = harness.run("fix_values")
    assert outcome.exit_code == 0
    assert ledger.get_run(outcome.run_id).turns_after_done == 2
    assert all(r.tool_choice == "none" for r in harness.requests[-2:])


def test_escalated_closing_turn_admits_only_a_final_answer(harness):
    outcome, ledger = harness.run("keeps_going", PIPELINE_LLM__JSON_SCHEMA="true",
                                  PIPELINE_AGENT__CONSTRAINED_TOOLS="always")
    assert outcome.exit_code == 0
    closing = harness.requests[-1]
    assert closing.kind == "decision"
    schema = closing.response_format["json_schema"]["schema"]
    assert "tool" not in json.dumps(schema) and "final_answer" in json.dumps(schema)
    assert ledger.get_run(outcome.run_id).turns_after_done == 1


def test_a_run_that_never_finishes_its_work_records_no_turns_after_done(harness):
    outcome, ledger = harness.run("silent")
    assert outcome.exit_code == 4
    assert ledger.get_run(outcome.run_id).turns_after_done is None


@pytest.mark.parametrize("stream", [False, True])
def test_over_http_no_turns_after_the_closing_message(http_harness, stream):
    outcome, ledger = http_harness.run("keeps_going", PIPELINE_LLM__STREAM=str(stream).lower())
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    assert len(assistant_turns(ledger, outcome.run_id)) == 7
    assert ledger.get_run(outcome.run_id).turns_after_done == 1
    agent = [r for r in http_harness.fake.requests if r.get("model") == "keeps_going" and r.get("tools")]
    assert agent[-1]["tool_choice"] == "none" and agent[-2]["tool_choice"] == "auto"
    assert all(bool(r.get("stream")) is stream for r in agent[-7:])
    # usage came through the stream's last chunk as through a plain reply
    assert all(t.prompt_tokens for t in assistant_turns(ledger, outcome.run_id))


# --- 2. capabilities probed, not guessed -------------------------------------------------------------------

def test_unknown_model_is_probed_and_escalated(http_harness):
    # litellm's map does not know openai/prose_until_schema; the probe finds it honours JSON schemas.
    outcome, ledger = http_harness.run("prose_until_schema")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    row = ledger.capability("openai/prose_until_schema", http_harness.api_base)
    assert (row.json_schema, row.tools, row.usage, row.error) == (True, False, True, None)
    probes = [r for r in http_harness.fake.requests if r.get("model") == "prose_until_schema"
              and (r.get("response_format") or {}).get("json_schema", {}).get("name") == "capability_probe"]
    assert len(probes) == 1
    # Stored: the next run of the same model at the same api_base does not ask again.
    outcome, _ = http_harness.run("prose_until_schema")
    assert outcome.exit_code == 0
    assert len([r for r in http_harness.fake.requests if r.get("model") == "prose_until_schema"
                and (r.get("response_format") or {}).get("json_schema", {}).get("name") == "capability_probe"]) == 1


def test_config_still_overrides_the_probe(http_harness):
    outcome, ledger = http_harness.run("prose_until_schema", PIPELINE_LLM__JSON_SCHEMA="false")
    assert outcome.exit_code == 3
    assert ledger.capability("openai/prose_until_schema", http_harness.api_base) is None  # never asked


def test_a_model_that_ignores_schemas_is_probed_and_not_escalated(http_harness):
    outcome, ledger = http_harness.run("prose")
    assert outcome.exit_code == 3
    assert ledger.capability("openai/prose", http_harness.api_base).json_schema is False


def _llm(tmp_path, api_base, scenario, fake_key=None, **env):
    path = write_config(tmp_path, api_base, scenario)
    cfg = config_mod.load(path, environ={KEY_ENV: fake_key or TEST_KEY, **env})
    return cfg, ChatModel(cfg.llm), Ledger(cfg.ledger_url)


def test_probe_failure_is_stored_and_asked_again(tmp_path, fake_llm, monkeypatch):
    from pipeline.model import probe

    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    _cfg, llm, ledger = _llm(tmp_path, fake_llm.api_base, "down")
    llm._sleep = lambda s: None
    answer = probe.support(llm, ledger)
    assert answer.json_schema is None and "unavailable" in answer.probe_error
    assert ledger.capability("openai/down", fake_llm.api_base).error
    before = fake_llm.count("down")
    probe.support(llm, ledger)  # a failed probe is no answer: asked again
    assert fake_llm.count("down") > before


def test_provider_change_is_probed_again(tmp_path, fake_llm, monkeypatch):
    from pipeline.model import probe

    monkeypatch.setenv(KEY_ENV, TEST_KEY)
    _, llm, ledger = _llm(tmp_path, fake_llm.api_base, "prose_until_schema")
    probe.supports_json_schema(llm, ledger)
    asked = fake_llm.count("prose_until_schema")
    assert probe.supports_json_schema(llm, ledger, served_model="fake-prose_until_schema-v1")
    assert fake_llm.count("prose_until_schema") == asked  # same provider: the stored answer
    assert probe.supports_json_schema(llm, ledger, served_model="another-model-v2")
    assert fake_llm.count("prose_until_schema") == asked + 2  # it changed: probed again (two requests)


@pytest.mark.litellm  # its own FakeLLM (a key of its own), reached through litellm over HTTP
def test_wrong_key_is_the_operators_to_fix(tmp_path, monkeypatch):
    from pipeline.model import probe

    fake = FakeLLM(api_key="the-right-key").start()
    try:
        monkeypatch.setenv(KEY_ENV, "a-wrong-key")
        _, llm, ledger = _llm(tmp_path, fake.api_base, "honest", fake_key="a-wrong-key")
        with pytest.raises(ConfigError, match="AuthenticationError"):
            probe.support(llm, ledger)
        assert len(fake.requests) == 0  # refused at the door, never retried
    finally:
        fake.stop()


@pytest.mark.slow  # reads litellm's model map: importing litellm takes seconds
def test_known_models_need_no_probe():
    from pipeline.model import probe

    answer = probe.known(ChatModel(config_mod.LLMConfig(model="openai/gpt-4o-mini", api_key_env="")))
    assert (answer.json_schema, answer.tools, answer.sources["json_schema"]) == (True, True, "model map")
    answer = probe.known(ChatModel(config_mod.LLMConfig(model="openai/gpt-4o-mini", api_key_env="", json_schema=False)))
    assert (answer.json_schema, answer.sources["json_schema"]) == (False, "config")
    answer = probe.known(ChatModel(config_mod.LLMConfig(model="openai/my-own-server-model", api_key_env="")))
    assert answer.json_schema is None and answer.tools is None


@pytest.mark.slow
def test_doctor_prints_what_the_model_supports(tmp_path, fake_llm):
    path = write_config(tmp_path, fake_llm.api_base, "prose_until_schema")
    result = run_cli(["doctor", "--config", str(path)], env={KEY_ENV: TEST_KEY}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "json_schema" in result.stdout and "probe" in result.stdout and "escalation" in result.stdout
    result = run_cli(["doctor", "--config", str(path), "--json"], env={KEY_ENV: TEST_KEY}, cwd=tmp_path)
    data = json.loads(result.stdout)
    assert (data["json_schema"], data["tools"], data["sources"]["json_schema"]) == (True, False, "probe")


@pytest.mark.slow
def test_doctor_exit_2_when_unreachable_or_the_key_is_wrong(tmp_path):
    fake = FakeLLM(api_key="the-right-key").start()
    try:
        path = write_config(tmp_path, fake.api_base, "honest", max_retries=0)
        result = run_cli(["doctor", "--config", str(path)], env={KEY_ENV: "a-wrong-key"}, cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "AuthenticationError" in result.stderr
    finally:
        fake.stop()
    path = write_config(tmp_path, "http://127.0.0.1:9/v1", "honest", max_retries=0)
    result = run_cli(["doctor", "--config", str(path)], env={KEY_ENV: TEST_KEY}, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot be reached" in result.stderr


@pytest.mark.slow
def test_run_with_a_wrong_key_exit_2(tmp_path):
    fake = FakeLLM(api_key="the-right-key").start()
    try:
        path = write_config(tmp_path, fake.api_base, "honest")
        result = run_cli(["run", "--config", str(path)], env={KEY_ENV: "a-wrong-key"}, cwd=tmp_path)
    finally:
        fake.stop()
    assert result.returncode == 2, result.stderr
    # As every failed run: one line, the runner's, with the status, the cause and "see: pipeline ledger diff" (issue
    # 50: it was said twice, by the runner and again by the CLI); the key itself never.
    assert any("ended error (exit 2)" in line and "AuthenticationError" in line and "see: pipeline ledger diff" in line
               for line in result.stderr.splitlines()), result.stderr
    assert "a-wrong-key" not in result.stderr
