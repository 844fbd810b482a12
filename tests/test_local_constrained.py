"""The tools -> JSON schema -> tool_calls translation, without a model.

The schema is checked with jsonschema against the replies it must accept and
refuse, so a change that loosens the constraint (an unknown tool, a missing
argument) fails here rather than in a slow real-model run.
"""

from __future__ import annotations

import json

import pytest

from pipeline.model.constrained import (
    constrained_response_format,
    constrained_tools_schema,
    decision_messages,
    parse_constrained,
    progress_note,
)
from pipeline.tools.catalog import capabilities
from pipeline.tools.toolbox import Toolbox

jsonschema = pytest.importorskip("jsonschema")  # a litellm dependency, not one of ours
TOOLS = Toolbox(capabilities()).schemas()


def valid(doc, tool_choice="auto") -> bool:
    try:
        jsonschema.validate(doc, constrained_tools_schema(TOOLS, tool_choice))
    except jsonschema.ValidationError:
        return False
    return True


def test_schema_has_one_branch_per_tool_plus_final_answer():
    branches = constrained_tools_schema(TOOLS)["anyOf"]
    assert [b["properties"].get("tool", {}).get("const") for b in branches] == [*Toolbox(capabilities()).names, None]
    assert branches[-1]["required"] == ["final_answer"]
    assert list(branches[0]["properties"]) == ["tool", "arguments"]  # name decided before arguments


@pytest.mark.parametrize("doc, ok", [
    ({"tool": "topic", "arguments": {}}, True),
    ({"tool": "draft", "arguments": {"topic_id": 3}}, True),
    ({"final_answer": "done"}, True),
    ({"tool": "draft", "arguments": {}}, False),                         # required argument missing
    ({"tool": "draft", "arguments": {"topic_id": "three"}}, False),      # wrong type
    ({"tool": "draft", "arguments": {"topic_id": 3, "x": 1}}, False),    # extra argument
    ({"tool": "deploy", "arguments": {}}, False),                        # unknown tool
    ({"tool": "topic"}, False),
    ({"tool": "topic", "arguments": {}, "final_answer": "x"}, False),
])
def test_schema_accepts_exactly_the_protocol(doc, ok):
    assert valid(doc) is ok


def test_tool_choice_keeps_its_openai_meaning():
    assert not valid({"final_answer": "done"}, "required")
    assert valid({"tool": "topic", "arguments": {}}, "required")
    forced = {"type": "function", "function": {"name": "publish"}}
    assert valid({"tool": "publish", "arguments": {"article_id": 1}}, forced)
    assert not valid({"tool": "topic", "arguments": {}}, forced)
    assert valid({"final_answer": "x"}, "none") and not valid({"tool": "topic", "arguments": {}}, "none")


def test_response_format_wraps_the_schema():
    rf = constrained_response_format(TOOLS)
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == constrained_tools_schema(TOOLS)


def test_parse_tool_call():
    content, calls = parse_constrained('{"tool": "draft", "arguments": {"topic_id": 3}}')
    assert content == ""
    [call] = calls
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "draft" and json.loads(call["function"]["arguments"]) == {"topic_id": 3}


@pytest.mark.parametrize("text, content", [
    ('{"final_answer": "Published at http://x/a.html"}', "Published at http://x/a.html"),
    ('{"final_answer": "cut off by max_tok', "cut off by max_tok"),
    ("plain prose, no JSON", "plain prose, no JSON"),
    ('{"name": "topic"}', '{"name": "topic"}'),
])
def test_parse_non_calls_come_back_as_content(text, content):
    assert parse_constrained(text) == (content, [])


def test_parse_accepts_fences_and_double_encoded_arguments():
    _, calls = parse_constrained('```json\n{"tool": "publish", "arguments": "{\\"article_id\\": 5}"}\n```')
    assert calls[0]["function"]["name"] == "publish"
    assert json.loads(calls[0]["function"]["arguments"]) == {"article_id": 5}


def _history():
    return [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "topic", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true, "topic_id": 7}'},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "draft", "arguments": '{"topic_id": 7}'}}]},
        {"role": "tool", "tool_call_id": "c2", "content": '{"ok": false, "error": "too short"}'},
    ]


def test_decision_messages_speak_one_protocol():
    out = decision_messages(_history(), TOOLS)
    assert all(m["role"] in ("system", "user", "assistant") and "tool_calls" not in m for m in out)
    assert out[0]["content"].startswith("SYS") and "draft(topic_id)" in out[0]["content"]
    assert json.loads(out[2]["content"]) == {"tool": "topic", "arguments": {}}
    assert out[3]["content"].startswith("Result of topic: ")
    assert out[-1]["role"] == "user" and "Result of draft" in out[-1]["content"]


def test_progress_note_counts_only_successes_as_done():
    note = progress_note(_history(), TOOLS)
    assert "topic -> draft (error)" in note
    assert "Not done yet: draft, humanize, publish, register, report." in note
    assert "no tool called yet" in progress_note(_history()[:2], TOOLS)


def test_prose_turns_and_nudges_are_kept_in_protocol():
    msgs = [*_history()[:2], {"role": "assistant", "content": "All done!"}, {"role": "user", "content": "Nothing ran."}]
    out = decision_messages(msgs, TOOLS)
    assert json.loads(out[2]["content"]) == {"final_answer": "All done!"}
    assert out[3]["content"].startswith("Nothing ran.") and "Progress:" in out[3]["content"]


@pytest.mark.litellm  # imports litellm
def test_register_local_provider_is_idempotent_and_lazy():
    import litellm

    from pipeline.model.local.provider import register_local_provider

    before = list(litellm.custom_provider_map)
    try:
        register_local_provider()
        register_local_provider()
        providers = [item["provider"] for item in litellm.custom_provider_map]
        assert providers.count("local") == 1 and providers.count("local-raw") == 1
    finally:
        litellm.custom_provider_map[:] = before


def test_agent_turns_and_capability_calls_keep_their_own_llama_cpp_slots():
    # bench, 2026-12-03: left to llama.cpp's choice, the rewrite calls took the agent's slot and the turn after
    # humanize read its whole conversation again (~15 s of 2 cores). Measured on the embedded model: a prompt cached
    # in slot 1 is read again from its first token in slot 0 (930 tokens, 16.7 s; 0.16 s in its own slot).
    from pipeline.model.local.provider import SLOTS, _request

    messages = [{"role": "user", "content": "hi"}]
    turn, _ = _request(messages, {"tools": TOOLS}, constrained=True)
    raw_turn, _ = _request(messages, {"tools": TOOLS}, constrained=False)
    part, _ = _request(messages, {"max_tokens": 10}, constrained=True)
    assert turn["id_slot"] == raw_turn["id_slot"] == SLOTS["agent"] != part["id_slot"] == SLOTS["capability"]


def test_the_embedded_server_keeps_its_kv_cache_in_q8_and_drafts_from_the_requests_own_tokens(tmp_path):
    # bench/bench_decoding.py on a run's replayed calls: the F16 KV cache held 52 MB more at every moment of a run
    # (its peak was over 2.5 GB), and drafts of 4 looked up in the request's tokens won back the Q8_0 cache's 4 %.
    xllamacpp = pytest.importorskip("xllamacpp")
    from pipeline.model.local.provider import NGRAM_DRAFT, server_params

    p = server_params(tmp_path / "model.gguf")
    q8 = xllamacpp.ggml_type.GGML_TYPE_Q8_0
    assert p.cache_type_k == q8 and p.cache_type_v == q8  # llama.cpp quantises V only with flash attention:
    assert p.flash_attn_type == xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED
    kinds = xllamacpp.common_speculative_type
    assert list(p.speculative.types) == [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    assert p.speculative.draft.n_max == p.speculative.ngram_simple.size_m == NGRAM_DRAFT
    # A draft model (bench/bench_speculative.py) replaces the n-gram drafts instead of adding to them.
    drafted = server_params(tmp_path / "model.gguf", draft=tmp_path / "draft.gguf")
    assert list(drafted.speculative.types) == [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
