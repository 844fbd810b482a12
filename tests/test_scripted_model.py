"""The in-process scripted model (pipeline.testing): what it returns, what it records, and runs driven by it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.model.llm import Reply
from pipeline.testing import (
    ScriptedModel,
    ScriptExhausted,
    honest_pipeline,
    provider_error,
    text,
    tool_call,
    tool_calls,
)

from scenarios import scripted
from support import REPO, rewrite_calls


def test_replies_come_back_in_order_with_usage_and_every_request_is_recorded():
    model = ScriptedModel()
    model.enqueue("plain text", tool_call("topic"), tool_calls(tool_call("draft", {"topic_id": 1}, id="a"),
                                                               tool_call("report", id="b"), content="two at once"))
    first = model.complete([{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"name": "topic"}}])
    assert (first.text, first.tool_calls) == ("plain text", [])
    assert first.served_model == "scripted-model" and first.prompt_tokens and first.completion_tokens
    assert first.finish_reason == "stop" and first.latency_ms > 0
    second = model.complete([{"role": "user", "content": "again"}], temperature=0.9)
    assert [(c.name, json.loads(c.arguments)) for c in second.tool_calls] == [("topic", {})]
    assert second.finish_reason == "tool_calls"
    third = model.complete([])
    assert third.text == "two at once" and [(c.id, c.name) for c in third.tool_calls] == [("a", "draft"), ("b", "report")]
    assert third.as_message()["tool_calls"][0]["function"] == {"name": "draft", "arguments": '{"topic_id": 1}'}
    assert model.remaining == 0
    asked = model.requests
    assert [r.n for r in asked] == [1, 2, 3]
    assert asked[0].messages == [{"role": "user", "content": "hi"}] and asked[0].tool_names == ["topic"]
    assert [r.kind for r in asked] == ["agent", "writing", "writing"]
    assert asked[0].temperature == model.cfg.temperature and asked[1].temperature == 0.9


def test_the_recorded_messages_are_a_copy_taken_at_the_call():
    model = ScriptedModel(replies=["one"])
    messages = [{"role": "user", "content": "hi"}]
    model.complete(messages)
    messages.append({"role": "assistant", "content": "later"})
    assert model.requests[0].messages == [{"role": "user", "content": "hi"}]


def test_a_queued_reply_is_never_shared_with_the_caller():
    queued = Reply(text="x", tool_calls=[tool_call("topic")])
    model = ScriptedModel(replies=[queued])
    got = model.complete([])
    got.tool_calls.clear()  # the agent loop may rewrite the reply it gets (constrained turns)
    assert queued.tool_calls and queued.served_model is None


def test_failures_are_raised_and_an_exhausted_script_says_so():
    model = ScriptedModel(replies=[provider_error("503 from upstream"), text("after")])
    with pytest.raises(Exception, match="503 from upstream") as info:
        model.complete([])
    assert info.value.exit_code == 5
    assert model.complete([]).text == "after"
    with pytest.raises(ScriptExhausted, match="more than scripted"):
        model.complete([{"role": "user", "content": "one more"}])


def test_a_responder_answers_once_the_queue_is_empty():
    model = ScriptedModel(replies=["queued"], responder=lambda request: f"answer {request.n}")
    assert [model.complete([]).text for _ in range(3)] == ["queued", "answer 2", "answer 3"]


def test_the_honest_pipeline_calls_each_capability_with_the_previous_ids():
    model = ScriptedModel(responder=honest_pipeline)
    tools = [{"type": "function", "function": {"name": "topic"}}]
    messages: list[dict] = [{"role": "user", "content": "go"}]
    results = {"topic": {"ok": True, "topic_id": 7}, "draft": {"ok": True, "article_id": 8},
               "humanize": {"ok": True, "article_id": 9, "score": 71.6},
               "publish": {"ok": True, "publication_id": 10, "url": "http://x/p.html"},
               "register": {"ok": True, "registration_no": "CT-1"}, "report": {"ok": True}}
    calls = []
    for _ in range(6):
        reply = model.complete(messages, tools=tools)
        [call] = reply.tool_calls
        calls.append((call.name, json.loads(call.arguments)))
        messages += [reply.as_message(), {"role": "tool", "tool_call_id": call.id, "content": json.dumps(results[call.name])}]
    assert calls == [("topic", {}), ("draft", {"topic_id": 7}), ("humanize", {"article_id": 8}),
                     ("publish", {"article_id": 9}), ("register", {"publication_id": 10}), ("report", {})]
    final = model.complete(messages, tools=tools)
    assert not final.tool_calls and "http://x/p.html" in final.text and "CT-1" in final.text and "72" in final.text
    with pytest.raises(ScriptExhausted, match="agent turns only"):
        model.complete(messages)  # a writing call: not the agent's turn


def test_a_scripted_run_records_what_the_model_was_shown(harness):
    outcome, ledger = harness.run("honest")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    [model] = harness.models
    agent = [r for r in model.requests if r.kind == "agent"]
    # Writing calls: the outline, the opening, four sections, the closing, and one rewrite per weak paragraph.
    writing = [r for r in model.requests if r.kind == "writing"]
    assert len(agent) == 7 and len(writing) == 7 + rewrite_calls(ledger, outcome.run_id)
    assert agent[0].tool_names == ["topic", "draft", "humanize", "publish", "register", "report"]
    assert [m["role"] for m in agent[0].messages] == ["system", "user"]
    assert agent[0].messages[0]["content"] == ledger.turns(outcome.run_id)[0].content
    assistant = [t for t in ledger.turns(outcome.run_id) if t.role == "assistant"]
    assert all(t.served_model == "fake-honest-v1" and t.requested_model == "openai/honest" for t in assistant)


def test_several_tool_calls_in_one_reply_run_in_order_in_one_turn(harness):
    cfg = harness.config("honest")
    model = scripted("honest", cfg.llm).enqueue(tool_calls(tool_call("topic", id="t1"), tool_call("deploy_site", id="d1")))
    from pipeline.ledger.writer import Ledger
    from pipeline.run.runner import run_once

    ledger = Ledger(cfg.ledger_url)
    outcome = run_once(cfg, ledger=ledger, llm=model)
    assert outcome.exit_code == 0
    first_two = ledger.executions(outcome.run_id)[:2]
    assert [(e.capability, e.ok) for e in first_two] == [("topic", True), ("deploy_site", False)]
    assert first_two[0].turn_id == first_two[1].turn_id


def test_a_provider_failure_ends_the_run_exit_5(harness):
    outcome, ledger = harness.run("down")
    assert (outcome.status, outcome.exit_code) == ("provider_unavailable", 5)
    assert ledger.get_run(outcome.run_id).status == "provider_unavailable"


def test_escalation_to_constrained_turns_in_process(harness):
    outcome, _ledger = harness.run("prose_until_schema", PIPELINE_LLM__JSON_SCHEMA="true")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    constrained = [r for r in harness.requests if r.kind == "decision"]
    assert constrained and constrained[0].tools is None
    outcome, _ = harness.run("prose_until_schema")  # a scripted model says no to json_schema unless configured
    assert outcome.exit_code == 3


SCRIPT = """
import socket, sys
tried = []
connect = socket.socket.connect
def no_socket(self, address, *a, **k):  # the run's own loopback servers (the scorer, the site's check) may be
    tried.append(address)              # reached; the model's api_base (the closed port 9) must never be
    if isinstance(address, tuple) and address[1] == 9:
        raise ConnectionRefusedError(f"no sockets here: {address}")
    return connect(self, address, *a, **k)
socket.socket.connect = no_socket
import os, pathlib
sys.path.insert(0, "tests")
os.environ["PIPELINE_TEST_LLM_KEY"] = "sk-test"
from pipeline import config
from pipeline.run.runner import run_once
from scenarios import scripted
from support import OFFLINE_API_BASE, write_config
here = pathlib.Path(sys.argv[1])
cfg = config.load(write_config(here, OFFLINE_API_BASE, "honest"), environ={"PIPELINE_TEST_LLM_KEY": "sk-test"})
os.chdir(here)
outcome = run_once(cfg, llm=scripted("honest", cfg.llm))
print(outcome.status, "litellm" in sys.modules, any(a[1] == 9 for a in tried if isinstance(a, tuple)))
"""


@pytest.mark.slow  # a fresh interpreter
def test_a_scripted_run_imports_no_litellm_and_opens_no_socket(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["done", "False", "False"]  # done; no litellm; nothing sent to the model's api_base
