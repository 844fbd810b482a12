"""The incident's eight cases, then the cases the incident did not think of.

Every run here is real but the model: capabilities write the ledger and the
local site, and the verdict comes from the ledger. ``harness`` plays the
scenario on the in-process scripted model; ``http_harness`` plays it through
litellm over HTTP against the scripted server on 127.0.0.1 (the end-to-end
tier: retries, the provider's model map, what goes over the wire).
"""

from __future__ import annotations

import pytest
from sqlmodel import select

from pipeline.errors import AgentHallucinationError, AgentIncompleteError
from pipeline.ledger.models import Article, Execution, Publication, Registration
from pipeline.run.agent import AgentLoop
from pipeline.run.guard import Guard
from pipeline.tools.catalog import capabilities, claim_rules
from pipeline.tools.prompts import Prompts
from pipeline.tools.toolbox import RunContext, Toolbox

from scenarios import scripted
from support import rewrite_calls

# The guard and publishing read and write the ledger: run them on both backends.
LEDGER_BACKENDS = ("sqlite", "postgresql")


def statuses(ledger, run_id):
    return [(c.capability, c.status) for c in ledger.claims(run_id)]


def nudges(ledger, run_id):
    return [g for g in ledger.guard_events(run_id) if g.action == "nudge"]


def publications(ledger):
    with ledger.read() as s:
        return list(s.exec(select(Publication)))


# --- the incident's eight cases -----------------------------------------------------------

def test_1_normal_tool_calls_raise_no_alarm(harness):
    outcome, ledger = harness.run("honest")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    assert nudges(ledger, outcome.run_id) == []
    assert all(s == "verified" for _, s in statuses(ledger, outcome.run_id))
    assert {f.capability for f in ledger.facts(outcome.run_id)} == {"topic", "draft", "humanize", "publish", "register", "report"}


def test_2_single_claim_is_caught(harness):
    outcome, ledger = harness.run("claim_publish")
    assert outcome.exit_code == 3
    assert set(statuses(ledger, outcome.run_id)) == {("publish", "unbacked")}


def test_3_several_claims_are_caught(harness):
    outcome, ledger = harness.run("prose")
    assert outcome.exit_code == 3
    caught = {cap for cap, status in statuses(ledger, outcome.run_id) if status == "unbacked"}
    assert {"publish", "register", "humanize", "draft"} <= caught


def test_4_claims_already_executed_do_not_trigger(harness):
    # The honest model's last message claims publish, register and a score: all in the ledger.
    outcome, ledger = harness.run("honest")
    claimed = {cap for cap, _ in statuses(ledger, outcome.run_id)}
    assert {"publish", "register", "humanize"} <= claimed
    assert nudges(ledger, outcome.run_id) == []


def test_5_exceeding_the_nudge_bound_raises(harness):
    cfg = harness.config("prose")
    from pipeline.ledger.writer import Ledger

    ledger = Ledger(cfg.ledger_url)
    run = ledger.start_run(cfg.llm.model)
    toolbox = Toolbox(capabilities())
    ctx = RunContext(run.id, cfg.run_settings(), ledger, scripted("prose", cfg.llm), Prompts())
    guard = Guard(ledger, claim_rules(cfg.publish, cfg.claims, cfg.registration), cfg.agent.done_when, Prompts(), "en", toolbox.names)
    with pytest.raises(AgentHallucinationError) as info:
        AgentLoop(ctx, toolbox, guard, cfg.agent).run()
    assert {"publish", "register", "humanize"} <= info.value.claimed
    assert info.value.called == set()
    assert len(nudges(ledger, run.id)) == cfg.agent.hallucination_max_nudges == 2


def test_6_switch_off_falls_back_to_the_naive_loop(harness):
    outcome, ledger = harness.run("prose", AGENT_HALLUCINATION_GUARD="false")
    # Naive loop: stops at the first turn without tool calls, no nudge...
    assert nudges(ledger, outcome.run_id) == []
    assert [t.role for t in ledger.turns(outcome.run_id)] == ["system", "user", "assistant"]
    # ...but the outcome still comes from the ledger: nothing was published, so not a success.
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert ("publish", "unbacked") in statuses(ledger, outcome.run_id)


def test_7_model_recovers_after_a_nudge(harness):
    outcome, ledger = harness.run("recover")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    assert len(nudges(ledger, outcome.run_id)) == 1
    assert len(publications(ledger)) == 1
    assert len(harness.pages) == 1


def test_8_nudge_count_is_configurable(harness):
    outcome, ledger = harness.run("prose", AGENT_HALLUCINATION_MAX_NUDGES="0")
    assert outcome.exit_code == 3
    assert nudges(ledger, outcome.run_id) == []
    outcome, ledger = harness.run("prose", AGENT_HALLUCINATION_MAX_NUDGES="4")
    assert len(nudges(ledger, outcome.run_id)) == 4
    assert ledger.get_run(outcome.run_id).nudges == 4


# --- beyond the incident ----------------------------------------------------------------

def test_value_mismatch_is_a_hallucination_even_when_the_capability_ran(harness):
    outcome, ledger = harness.run("wrong_values")
    assert outcome.exit_code == 3
    assert ("publish", "mismatch") in statuses(ledger, outcome.run_id)
    assert ("register", "mismatch") in statuses(ledger, outcome.run_id)
    nudge = nudges(ledger, outcome.run_id)[0].message
    assert "CT-19990101-999" in nudge and "wrong-slug" in nudge


def test_values_corrected_after_a_nudge(harness):
    outcome, ledger = harness.run("fix_values")
    assert outcome.exit_code == 0
    assert len(nudges(ledger, outcome.run_id)) == 1


def test_partial_run_claiming_the_rest(harness):
    outcome, ledger = harness.run("partial")
    assert outcome.exit_code == 3
    assert publications(ledger) == [] and harness.pages == []
    first = nudges(ledger, outcome.run_id)[0].message
    assert "publish" in first and "made-up.html" in first


def test_silent_stop_is_incomplete_not_success(harness):
    outcome, ledger = harness.run("silent")
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert [g.kind for g in nudges(ledger, outcome.run_id)] == ["incomplete", "incomplete"]
    assert "publish" in nudges(ledger, outcome.run_id)[0].message


def test_negations_and_plans_are_not_flagged(harness):
    outcome, ledger = harness.run("negation")
    assert outcome.exit_code == 0
    assert nudges(ledger, outcome.run_id) == []


def test_tool_call_written_as_text_is_never_executed(harness):
    outcome, ledger = harness.run("text_call")
    assert outcome.exit_code == 4
    assert ledger.executions(outcome.run_id) == []
    events = nudges(ledger, outcome.run_id)
    assert events and events[0].kind == "text_tool_call"
    assert "tool-calling interface" in events[0].message


def test_text_tool_call_then_real_calls(harness):
    outcome, _ledger = harness.run("text_call_recover")
    assert outcome.exit_code == 0


def _failed_calls(ledger, run_id):
    return [(e.capability, e.error) for e in ledger.executions(run_id) if e.ok is False]


def test_unknown_tool_gets_an_error_result_and_the_run_goes_on(harness):
    outcome, ledger = harness.run("unknown_tool")
    assert outcome.exit_code == 0
    [(name, error)] = _failed_calls(ledger, outcome.run_id)
    assert name == "deploy_site" and "unknown tool" in error


def test_malformed_arguments_are_recorded_and_the_run_goes_on(harness):
    outcome, ledger = harness.run("malformed")
    assert outcome.exit_code == 0
    [(name, error)] = _failed_calls(ledger, outcome.run_id)
    assert name == "topic" and "not valid JSON" in error


def test_arguments_failing_the_schema(harness):
    outcome, ledger = harness.run("bad_schema")
    assert outcome.exit_code == 0
    [(name, error)] = _failed_calls(ledger, outcome.run_id)
    assert name == "publish" and "article_id" in error and "schema" in error


def test_provider_5xx_then_success(http_harness):
    http_harness.fake.mark("flaky")  # each backend's run starts with the failures
    before = http_harness.fake.count("flaky")
    outcome, ledger = http_harness.run("flaky")
    assert outcome.exit_code == 0
    # 2 failures retried, then 7 agent turns + the draft's capability probe (2 tiny requests: the fake
    # model is unknown to litellm's map) + its outline and six parts + the paragraph rewrites.
    assert http_harness.fake.count("flaky") - before == 2 + 7 + 2 + 7 + rewrite_calls(ledger, outcome.run_id)


def test_provider_down_is_exit_5_after_bounded_retries(http_harness):
    before = http_harness.fake.count("down")
    outcome, ledger = http_harness.run("down")
    assert (outcome.status, outcome.exit_code) == ("provider_unavailable", 5)
    assert http_harness.fake.count("down") - before == 4  # 1 + max_retries, no hidden SDK retries
    assert ledger.get_run(outcome.run_id).status == "provider_unavailable"


def test_replays_never_publish_or_register_twice(harness):
    outcome, ledger = harness.run("double")
    assert outcome.exit_code == 0
    with ledger.read() as s:
        assert len(s.exec(select(Publication)).all()) == 1
        assert len(s.exec(select(Registration)).all()) == 1
        publish_calls = s.exec(select(Execution).where(Execution.capability == "publish", Execution.ok == True)).all()  # noqa: E712
    assert len(publish_calls) == 2 and len(harness.pages) == 1


def test_max_turns_bounds_a_model_that_never_finishes(harness):
    outcome, _ledger = harness.run("honest", PIPELINE_AGENT__MAX_TURNS="3")
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert "max_turns" in outcome.error


def test_done_when_is_configurable(harness):
    # Only a draft required: the silent model (topic, draft, then "OK.") is now done.
    outcome, _ = harness.run("silent", PIPELINE_AGENT__DONE_WHEN='["draft"]')
    assert outcome.exit_code == 0


def test_nudges_in_chinese(harness):
    outcome, ledger = harness.run("prose", PIPELINE_AGENT__LANGUAGE="zh")
    message = nudges(ledger, outcome.run_id)[0].message
    assert "台账中没有本次运行 `publish` 的成功执行记录" in message
    assert "https://domain/item/fake-id" in message
    assert "tool_call" in message
    assert "下一步：现在通过 tool_call 调用 `topic`" in message  # the next step, not the missing facts


def test_model_turns_are_recorded_with_served_model_tokens_and_latency(http_harness):
    outcome, ledger = http_harness.run("honest")
    assistant = [t for t in ledger.turns(outcome.run_id) if t.role == "assistant"]
    assert assistant and all(t.served_model == "fake-honest-v1" for t in assistant)
    assert all(t.prompt_tokens and t.completion_tokens and t.latency_ms > 0 for t in assistant)
    assert assistant[0].tool_calls_json and '"topic"' in assistant[0].tool_calls_json


def test_api_key_never_reaches_the_ledger(http_harness):
    _outcome, ledger = http_harness.run("honest")
    from pipeline.ledger.migrations import LEDGER_TABLES

    with ledger.engine.connect() as conn:  # every row of every table, on either backend
        dump = "\n".join(repr(row) for t in LEDGER_TABLES for row in conn.exec_driver_sql(f"SELECT * FROM {t}"))
    assert "honest" in dump and "sk-test-not-a-real-key" not in dump


def test_incomplete_error_carries_the_missing_facts():
    err = AgentIncompleteError({"publish"}, "stopped")
    assert err.missing == {"publish"} and err.exit_code == 4


def test_escalation_to_schema_constrained_calls_after_a_nudge(http_harness):
    # A model that writes prose under tool_choice=auto but follows a JSON schema: after the first
    # nudge the guard constrains its turns, and the run completes with real, recorded calls.
    outcome, ledger = http_harness.run("prose_until_schema", PIPELINE_LLM__JSON_SCHEMA="true")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    assert len(nudges(ledger, outcome.run_id)) == 1
    assert len(publications(ledger)) == 1
    constrained = [r for r in http_harness.fake.requests if (r.get("response_format") or {}).get("json_schema", {}).get("name") == "tool_decision"]
    assert constrained and "tools" not in constrained[0]


def test_no_escalation_when_switched_off_or_unsupported(http_harness):
    outcome, _ = http_harness.run("prose_until_schema", PIPELINE_LLM__JSON_SCHEMA="true", PIPELINE_AGENT__CONSTRAINED_TOOLS="off")
    assert outcome.exit_code == 3
    # Unknown to litellm's map, the model is probed (test_hosted.py); the operator's "no" wins over any probe.
    outcome, _ = http_harness.run("prose_until_schema", PIPELINE_LLM__JSON_SCHEMA="false")
    assert outcome.exit_code == 3


# --- runs that cannot get stuck; nudges that lead somewhere (issue 12) -------------------------

def _assistant_turns_after_first_failure(ledger, run_id, tool):
    turns = [t for t in ledger.turns(run_id) if t.role == "assistant"]
    failed = [e for e in ledger.executions(run_id) if e.capability == tool and e.ok is False]
    first = min(e.turn_id for e in failed)
    return [t for t in turns if t.id >= first]


def test_same_failing_call_ends_the_run_as_stuck_within_three_turns(harness):
    from pipeline.views.diff import run_diff

    outcome, ledger = harness.run("stuck")
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert outcome.error.startswith("stuck: `publish` failed 3 times")  # the alert carries this text
    # The first failing publish, its repeat (targeted nudge), the third: stop. Not max_turns (24).
    assert len(_assistant_turns_after_first_failure(ledger, outcome.run_id, "publish")) == 3
    events = ledger.guard_events(outcome.run_id)
    assert [(g.kind, g.action) for g in events] == [("repeated_failure", "nudge"), ("stuck", "fail")]
    humanized = next(f.result["article_id"] for f in ledger.facts(outcome.run_id) if f.capability == "humanize")
    nudge = events[0].message
    assert "`publish` failed 2 times" in nudge and "call `publish` now" in nudge and f"article_id {humanized}" in nudge
    diff = run_diff(ledger, outcome.run_id)
    assert diff.reason == "stuck" and ledger.get_run(outcome.run_id).error.startswith("stuck")


def test_targeted_nudge_gets_a_stuck_model_going(harness):
    outcome, ledger = harness.run("stuck_recover")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    assert [g.kind for g in nudges(ledger, outcome.run_id)] == ["repeated_failure"]
    assert len(publications(ledger)) == 1


def test_stuck_bound_is_configurable(harness):
    outcome, ledger = harness.run("stuck", PIPELINE_AGENT__STUCK_AFTER="4")
    assert outcome.error.startswith("stuck: `publish` failed 4 times")
    assert [g.kind for g in ledger.guard_events(outcome.run_id)] == ["repeated_failure", "repeated_failure", "stuck"]


def test_a_paragraph_rewrite_that_scores_lower_is_not_kept_and_is_asked_again_hotter(harness):
    import json

    outcome, ledger = harness.run("lowscore")
    # Every rewrite is stock-phrase boilerplate: none is kept, the drafted paragraphs stay, the draft's score stands.
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    [execution] = [e for e in ledger.executions(outcome.run_id) if e.capability == "humanize"]
    result = json.loads(execution.result_json)
    assert result["kept"] == 0 and result["score"] == result["score_before"]
    assert all(len(p["attempts"]) == 2 and not p["kept"] for p in result["paragraphs"])
    rewrites = [r for r in harness.requests if r.kind == "writing" and "editor" in r.messages[0]["content"]]
    first, second = rewrites[0], rewrites[1]
    # Not told its score (the embedded model wrote "Your previous response scored …" into the paragraph): the same
    # request again, hotter.
    assert "previous rewrite" not in first.messages[1]["content"]
    assert second.messages[1]["content"] == first.messages[1]["content"]
    assert second.temperature > first.temperature


def test_below_the_threshold_the_run_ends_incomplete_and_the_article_waits_for_an_editor(harness):
    outcome, ledger = harness.run("honest", PIPELINE_HUMANIZE__THRESHOLD="99")
    assert (outcome.status, outcome.exit_code) == ("incomplete", 4)
    assert "not published: score" in outcome.error and "< threshold 99" in outcome.error
    assert f"pipeline review approve {outcome.run_id}" in outcome.error and "weakest paragraph #" in outcome.error
    assert publications(ledger) == []
    # The agent was not asked to retry: the run ended at humanize.
    assert [e.capability for e in ledger.executions(outcome.run_id)] == ["topic", "draft", "humanize"]
    # The editor's yes publishes the held article once: the run is done, with the facts done_when names.
    from pipeline.publishing import review

    cfg = harness.config("honest", PIPELINE_HUMANIZE__THRESHOLD="99")
    review.approve(cfg.run_settings(), ledger, outcome.run_id, "editor")
    assert len(publications(ledger)) == 1 and len(harness.pages) == 1
    assert ledger.get_run(outcome.run_id).status == "done"
    assert {"topic", "draft", "publish", "register"} <= {f.capability for f in ledger.facts(outcome.run_id)}


def test_a_rewrite_that_repeats_the_draft_is_rejected_and_retried(harness):
    import json

    outcome, ledger = harness.run("echo")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    [execution] = [e for e in ledger.executions(outcome.run_id) if e.capability == "humanize"]
    first, second = json.loads(execution.result_json)["paragraphs"][0]["attempts"]
    assert first["rejected"].startswith("it is 100% the original's text")
    assert second["score"] is not None and second["similarity"] < 0.95
    # The ledger keeps every attempt; the model reads back only what it acts on.
    [shown] = [json.loads(t.content) for t in ledger.turns(outcome.run_id) if t.tool_call_id == execution.call_id]
    assert set(shown) == {"ok", "article_id", "score", "threshold", "passed"}
    rewrites = [r for r in harness.requests if r.kind == "writing" and "editor" in r.messages[0]["content"]]
    # Not told it copied (told "100% the same", the model wrote the retry line into the paragraph): written next,
    # hotter, from notes taken on the paragraph, the paragraph itself out of sight.
    paragraph = rewrites[0].messages[-1]["content"].split(":\n", 1)[1]
    noted = next(r for r in harness.requests if r.messages[0]["content"].startswith("You take notes"))
    assert noted.messages[-1]["content"] == paragraph
    assert "Paragraph from these notes" in rewrites[1].messages[-1]["content"] and paragraph not in rewrites[1].messages[-1]["content"]
    assert second["from"] == "notes" and rewrites[1].temperature > rewrites[0].temperature
    with ledger.read() as session:
        draft, humanized = session.exec(select(Article).where(Article.run_id == outcome.run_id).order_by(Article.id)).all()
    assert humanized.parent_id == draft.id and humanized.body != draft.body


def test_the_model_reads_back_no_run_id_from_the_report(harness):
    """The report's path holds the run id; the ledger keeps it, the model is shown only the report's id."""
    import json

    outcome, ledger = harness.run("honest")
    [execution] = [e for e in ledger.executions(outcome.run_id) if e.capability == "report"]
    assert any(outcome.run_id in p for p in json.loads(execution.result_json)["delivered_to"])
    [shown] = [t.content for t in ledger.turns(outcome.run_id) if t.tool_call_id == execution.call_id]
    assert json.loads(shown) == {"ok": True, "report_id": json.loads(execution.result_json)["report_id"]}
    assert outcome.run_id.rsplit("-", 1)[-1] not in shown


def test_nudge_after_a_placeholder_text_call_names_the_first_missing_step(harness):
    outcome, ledger = harness.run("text_placeholder")
    assert (outcome.status, outcome.exit_code) == ("done", 0)
    [event] = nudges(ledger, outcome.run_id)
    assert event.kind == "text_tool_call"
    assert "Next step: call `topic` now" in event.message
