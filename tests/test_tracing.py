"""OpenTelemetry traces: GenAI-convention spans when enabled, not a single opentelemetry import when not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.runtime import tracing

from support import KEY_ENV, write_config


@pytest.fixture
def memory_spans():
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the global provider can be set once per process
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()
    tracing._tracer = None  # later tests run untraced


def test_a_run_is_one_agent_span_with_model_and_tool_spans(http_harness, memory_spans):
    outcome, _ = http_harness.run("honest", '\n[traces]\nenabled = true\nexporter = "none"\n')
    assert outcome.exit_code == 0
    spans = memory_spans.get_finished_spans()
    [run] = [s for s in spans if s.name == "invoke_agent pipeline"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == outcome.run_id
    assert run.attributes["pipeline.run.status"] == "done" and run.parent is None
    by_id = {s.context.span_id: s for s in spans}
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert [s.attributes["gen_ai.tool.name"] for s in tools] == ["topic", "draft", "humanize", "publish", "register", "report"]
    assert all(s.parent.span_id == run.context.span_id and s.attributes["gen_ai.tool.call.id"] for s in tools)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert all(s.name == "chat openai/honest" and s.attributes["gen_ai.request.model"] == "openai/honest" for s in chats)
    assert all(s.attributes["gen_ai.provider.name"] == "openai" and s.attributes["gen_ai.usage.input_tokens"] > 0
               and s.attributes["gen_ai.response.model"] for s in chats)
    parents = {by_id[s.parent.span_id].name for s in chats}
    assert parents == {"invoke_agent pipeline", "execute_tool draft", "execute_tool humanize"}  # the writers' own calls nest


def test_a_failed_run_and_a_failed_tool_are_error_spans(harness, memory_spans):
    from opentelemetry.trace import StatusCode

    _outcome, _ = harness.run("unknown_tool", '\n[traces]\nenabled = true\nexporter = "none"\n')
    spans = memory_spans.get_finished_spans()
    bad = [s for s in spans if s.attributes.get("gen_ai.tool.name") not in (None, "topic", "draft", "humanize", "publish",
                                                                            "register", "report")]
    assert bad and bad[0].status.status_code == StatusCode.ERROR
    failed, _ = harness.run("prose", '\n[traces]\nenabled = true\nexporter = "none"\n')
    [run] = [s for s in memory_spans.get_finished_spans() if s.attributes.get("gen_ai.conversation.id") == failed.run_id]
    assert run.status.status_code == StatusCode.ERROR and run.attributes["pipeline.exit_code"] == 3


def test_opentelemetry_is_not_imported_when_off(tmp_path, fake_llm):
    path = write_config(tmp_path, fake_llm.api_base, "honest")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline", "run", "--config", str(path)],
                          env={**os.environ, KEY_ENV: "x"}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time")]
    assert "litellm" in imported  # the trace really covers a run
    assert not [m for m in imported if m == "opentelemetry" or m.startswith("opentelemetry.")]
