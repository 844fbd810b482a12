"""Every model call is in the ledger: the agent's turns and the capabilities' own calls (``pipeline.model.calls``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipeline import config
from pipeline.cli import app
from pipeline.errors import ProviderUnavailableError
from pipeline.ledger import migrations
from pipeline.ledger.reader import LedgerReader
from pipeline.ledger.writer import Ledger
from pipeline.model.messages import ToolCall
from pipeline.testing import ScriptedModel, provider_error
from pipeline.tools.catalog import toolbox
from pipeline.tools.prompts import Prompts
from pipeline.tools.toolbox import RunContext


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _side_requests(requests) -> int:
    """Requests a capability made: no tools offered, not the agent's constrained decision."""
    return sum(1 for r in requests if not r.tools and (r.response_format or {}).get("json_schema", {}).get("name") != "tool_decision")


def test_capabilities_model_calls_are_recorded_with_their_step(harness):
    outcome, ledger = harness.run("honest")
    calls = ledger.model_calls(outcome.run_id)
    assert len(calls) == _side_requests(harness.requests) >= 2
    executions = {e.id: e for e in ledger.executions(outcome.run_id)}
    assert {c.capability for c in calls} >= {"draft", "humanize"}
    for c in calls:
        assert executions[c.execution_id].capability == c.capability  # linked to the step it served
        assert c.requested_model == "openai/honest" and c.served_model == "fake-honest-v1" and c.error is None
        assert c.prompt_tokens and c.completion_tokens and c.latency_ms > 0 and c.finish_reason == "stop"


def test_each_side_call_keeps_what_it_sent_and_what_it_answered(harness):
    # bench, 2026-12-04: a draft lost to its checks is not stored as an article, and its parts (tokens and latency
    # only) could not be read to see what had failed.
    outcome, ledger = harness.run("honest")
    requests = [r for r in harness.requests if not r.tools and
                (r.response_format or {}).get("json_schema", {}).get("name") != "tool_decision"]
    calls = ledger.model_calls(outcome.run_id)
    assert [json.loads(c.messages_json) for c in calls] == [r.messages for r in requests]
    assert all(c.reply for c in calls)
    path = str(harness.dir / "config.toml")
    full = invoke("ledger", "show", "--full", "--config", path).stdout
    draft_call = next(c for c in calls if c.capability == "draft")
    assert "asked:" in full and draft_call.reply.splitlines()[0][:60] in full
    assert "answered:" not in invoke("ledger", "show", "--config", path).stdout


def test_calls_through_litellm_are_recorded_by_the_model_client(http_harness):
    before = len(http_harness.fake.requests)
    outcome, ledger = http_harness.run("honest")
    calls = ledger.model_calls(outcome.run_id)
    assert {c.capability for c in calls} >= {"draft", "humanize"}
    assert all(c.served_model == "fake-honest-v1" and c.prompt_tokens and c.latency_ms > 0 for c in calls)
    # what each sent and answered, through litellm (the capability probe answers with a tool call, not text)
    assert all(json.loads(c.messages_json) for c in calls) and all(c.reply for c in calls if c.finish_reason == "stop")
    # The agent's own calls are its turns, the rest are model_calls: each request once, none twice.
    sent = http_harness.fake.requests[before:]
    # (the draft's capability probe offers a `ping` tool: a side call of the draft step, with tools)
    assert len(calls) == sum(1 for r in sent if not r.get("tools")
                             or [t["function"]["name"] for t in r["tools"]] == ["ping"])
    assert len(calls) + sum(1 for t in ledger.turns(outcome.run_id) if t.role == "assistant") == len(sent)


def test_ledger_show_totals_count_every_model_call(harness):
    outcome, ledger = harness.run("honest")
    path = str(harness.dir / "config.toml")
    data = json.loads(invoke("ledger", "show", "--json", "--config", path).stdout)
    tot, calls = data["totals"], data["model_calls"]
    turns = [t for t in data["turns"] if t["role"] == "assistant"]
    assert tot["side_calls"] == len(calls) == len(ledger.model_calls(outcome.run_id)) > 0
    assert tot["model_calls"] == len(turns) + len(calls)
    assert tot["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns) + sum(c["prompt_tokens"] for c in calls)
    assert tot["completion_tokens"] == sum(t["completion_tokens"] for t in turns) + sum(c["completion_tokens"] for c in calls)
    assert tot["model_latency_ms"] == pytest.approx(sum(t["latency_ms"] for t in turns) + sum(c["latency_ms"] for c in calls), abs=0.2)
    assert tot["overhead"] == pytest.approx(tot["wall_ms"] / tot["model_latency_ms"], rel=1e-2)
    text = invoke("ledger", "show", "--config", path).stdout
    assert f"totals {tot['model_calls']} model calls ({len(turns)} turns, {len(calls)} by capabilities)" in text
    assert text.count("↳ model call fake-honest-v1") == len(calls)


def test_stats_count_the_capabilities_model_calls(harness):
    outcome, ledger = harness.run("honest")
    data = json.loads(invoke("stats", "--json", "--config", str(harness.dir / "config.toml")).stdout)
    [m] = data["models"]
    calls = ledger.model_calls(outcome.run_id)
    turns = [t for t in ledger.turns(outcome.run_id) if t.role == "assistant"]
    assert m["side_calls"] == len(calls) > 0 and m["side_call_latency_ms_p50"] is not None
    assert m["prompt_tokens"] == sum(t.prompt_tokens for t in turns + calls)  # type: ignore[operator]
    assert m["model_time_s"] == round(sum(t.latency_ms for t in turns + calls) / 1000, 1)  # type: ignore[operator]


def _ctx(tmp_path, llm=None):
    cfg = config.load(None, environ={"PIPELINE_LEDGER__URL": f"sqlite:///{tmp_path}/ledger.db", "PIPELINE_TOPIC__BACKLOG": '""'})
    cfg.base_dir = tmp_path
    ledger = Ledger(cfg.ledger_url)
    return RunContext(ledger.start_run("m").id, cfg.run_settings(), ledger, llm or ScriptedModel(cfg.llm), Prompts())


def test_a_brainstorm_is_recorded_as_the_topic_steps_call(tmp_path):
    from scenarios import scripted

    ctx = _ctx(tmp_path)
    ctx.llm = scripted("honest", ctx.llm.cfg)
    result = toolbox().execute(ctx, ToolCall("c1", "topic", "{}"))
    assert result.ok and result.payload["source"] == "llm"
    [call] = ctx.ledger.model_calls(ctx.run_id)
    [execution] = ctx.ledger.executions(ctx.run_id)
    assert (call.capability, call.execution_id) == ("topic", execution.id) and call.completion_tokens


def test_a_failed_side_call_is_recorded_with_its_error(tmp_path):
    ctx = _ctx(tmp_path)
    ctx.llm.enqueue(provider_error("upstream overloaded"))
    with pytest.raises(ProviderUnavailableError):
        toolbox().execute(ctx, ToolCall("c1", "topic", "{}"))
    [call] = ctx.ledger.model_calls(ctx.run_id)
    [execution] = ctx.ledger.executions(ctx.run_id)
    assert call.execution_id == execution.id and execution.ok is False
    assert "upstream overloaded" in call.error and call.latency_ms is not None and call.completion_tokens is None


def test_agent_turns_outside_a_step_are_not_side_calls(tmp_path):
    ctx = _ctx(tmp_path)
    ctx.llm.enqueue("hello")
    ctx.llm.complete([{"role": "user", "content": "hi"}])
    ctx.ledger.flush()
    assert ctx.ledger.model_calls(ctx.run_id) == []


def test_a_ledger_from_before_model_calls_is_read_as_it_is(harness):
    outcome, ledger = harness.run("honest")
    migrations.migrate(ledger.engine, "0012", allow_downgrade=True)
    ledger.close()
    reader = LedgerReader(harness.config("honest").ledger_url)
    assert reader.model_calls(outcome.run_id) == [] and reader.turns(outcome.run_id)
    data = json.loads(invoke("ledger", "show", "--json", "--config", str(harness.dir / "config.toml")).stdout)
    assert data["totals"]["side_calls"] == 0 and data["totals"]["model_turns"] > 0


def test_the_scoring_models_passes_are_recorded_as_the_steps_model_calls(tmp_path, monkeypatch):
    # The scorer is a model too: its forward passes are part of the run's model time (issue 22's overhead ratio).
    from pathlib import Path

    import numpy as np

    from pipeline.model import calls
    from pipeline.model.local import logprobs

    model = logprobs.ScoringModel.__new__(logprobs.ScoringModel)  # no weights: one token, no forward pass
    model.path, model._np = Path("scorer.gguf"), np
    monkeypatch.setattr(model, "tokenize", lambda text: ([42], [len(text)]))
    ctx = _ctx(tmp_path)
    execution = ctx.ledger.open_execution(ctx.run_id, None, "c1", "humanize", "{}")
    with calls.step(ctx.ledger, ctx.run_id, execution):
        assert model.stats("Hi").n == 0
    ctx.ledger.close_execution(execution, ok=True, result={})
    [call] = ctx.ledger.model_calls(ctx.run_id)
    assert (call.capability, call.requested_model, call.prompt_tokens) == ("humanize", "scorer/scorer.gguf", 1)
    assert call.completion_tokens is None and call.latency_ms is not None
