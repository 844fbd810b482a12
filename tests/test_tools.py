"""Capabilities declared from signatures; the dispatcher records every call."""

from __future__ import annotations

from typing import Annotated

import pytest

from pipeline.tools.catalog import capabilities
from pipeline.tools.toolbox import Toolbox, ToolCall, capability


def test_six_capabilities_named_as_in_the_ledger():
    assert [c.name for c in capabilities()] == ["topic", "draft", "humanize", "publish", "register", "report"]


def test_schema_comes_from_the_signature():
    schema = next(c for c in capabilities() if c.name == "publish").schema()
    fn = schema["function"]
    assert fn["name"] == "publish" and fn["description"].startswith("Publish")
    assert fn["parameters"]["properties"]["article_id"] == {"type": "integer", "description": "The article_id returned by humanize."}
    assert fn["parameters"]["required"] == ["article_id"]
    assert fn["parameters"]["additionalProperties"] is False


def test_registration_fails_without_a_description():
    def nodoc(ctx, x: Annotated[int, "x"]):
        return {}

    with pytest.raises(TypeError, match="no docstring"):
        capability(order=99)(nodoc)

    def undescribed(ctx, x: int):
        """Doc."""
        return {}

    with pytest.raises(TypeError, match="Annotated"):
        capability(order=99)(undescribed)


class _Ledger:
    def __init__(self):
        self.failed = []

    def record_failed_call(self, *args):
        self.failed.append(args)


class _Ctx:
    run_id = "r1"

    def __init__(self):
        self.ledger = _Ledger()


@pytest.mark.parametrize("call,needle", [
    (ToolCall("1", "deploy", "{}"), "unknown tool 'deploy'"),
    (ToolCall("2", "publish", "{oops"), "not valid JSON"),
    (ToolCall("3", "publish", "[1]"), "must be a JSON object"),
    (ToolCall("4", "publish", '{"article_id": "x"}'), "article_id"),
    (ToolCall("5", "publish", '{"article_id": 1, "force": true}'), "force: unexpected argument"),
    (ToolCall("6", "publish", "{}"), "article_id: Field required"),
])
def test_rejected_calls_are_recorded_and_explained(call, needle):
    ctx = _Ctx()
    result = Toolbox(capabilities()).execute(ctx, call, turn=None)
    assert not result.ok and needle in result.payload["error"]
    assert len(ctx.ledger.failed) == 1 and ctx.ledger.failed[0][3] == call.name


def test_the_model_reads_the_shown_keys_of_a_success_and_every_key_of_an_error():
    import json

    from pipeline.tools.toolbox import ToolResult

    shown = ToolResult(True, {"report_id": 1, "report": "# long text"}, ("report_id",))
    assert json.loads(shown.content()) == {"ok": True, "report_id": 1}
    failed = ToolResult(False, {"error": "no such article", "detail": "x"}, ("report_id",))
    assert json.loads(failed.content()) == {"ok": False, "error": "no such article", "detail": "x"}
    assert json.loads(ToolResult(True, {"a": 1, "b": 2}).content()) == {"ok": True, "a": 1, "b": 2}
