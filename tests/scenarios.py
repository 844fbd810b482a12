"""The scripted model's scenarios, declared once: served over HTTP by ``fakellm`` and in-process by ``scripted``.

A scenario is a name (``honest``, ``prose`` …) that decides every answer from the
request alone: agent turns (requests that offer ``tools``) follow the scenario;
the guard's JSON-schema constrained turns are answered honestly; requests
without tools are the capabilities' own calls (topic brainstorming as JSON,
draft and humanize as a fixed article).

Scenarios:
    honest            calls topic → draft → humanize → publish → register → report, then reports true values
    prose             the incident: no tool calls ever, only a fabricated success report (Chinese)
    prose_en          the same in English
    claim_publish     no tool calls, one claim only: "文章已发布。"
    recover           prose first; after the first nudge behaves honestly
    partial           runs topic/draft/humanize, then claims publish and register without calling them
    wrong_values      runs everything, then quotes a URL and number the ledger never recorded, every time
    fix_values        wrong values first, the true ones after a nudge
    silent            runs topic and draft, then stops with "OK." and no claims
    text_call         writes the tool call as a ```json block, every time
    text_call_recover writes the call as text once, then uses real tool calls
    flaky             HTTP: the first ``FLAKY_FAILURES`` requests get 503, then honest (in-process: honest)
    down              every request fails: 503 over HTTP, ``provider_error()`` in-process
    unknown_tool      first calls a tool that does not exist, then honest
    malformed         first sends arguments that are not JSON, then honest
    bad_schema        first sends publish arguments of the wrong type, then honest
    double            honest, but calls publish and register twice each
    negation          honest, and the final text also contains negated and future statements
    prose_until_schema  prose in every free turn; honest once a turn is JSON-schema constrained
                        (the guard's escalation), answering {"call": {"tool": …, "arguments": …}}
    stuck             after humanize, calls publish with the draft's article_id (an error) every time
    stuck_recover     the same, until the guard's targeted nudge; then honest
    lowscore          honest, but every rewrite it writes for humanize is stock-phrase boilerplate
                      that scores below the threshold, so publish keeps failing
    echo              honest, but a rewrite returns the draft word for word until asked hotter than the
                      first rewrite's temperature ([humanize] temperature, 0.9)
    text_placeholder  first writes publish as text with a placeholder ("article_id": <article_id>),
                      then follows the step the nudge names (honest)
    keeps_going       honest up to the report, then calls topic again on every turn, tool_choice "none"
                      or not (the real 1.5B model did: 17 turns after the report, until max_turns)
    keeps_going_text  the same, but writes the topic call as a ```json block after the report
"""

from __future__ import annotations

import json
import re
from typing import Any

from pipeline.config import LLMConfig
from pipeline.testing import (
    ORDER,
    Request,
    ScriptedModel,
    final_report,
    honest_turn,
    provider_error,
    step_arguments,
    succeeded,
    tool_results,
)

FLAKY_FAILURES = 2
# Scenarios whose provider honours response_format JSON schemas (what a capability probe finds out).
FOLLOWS_SCHEMAS = ("prose_until_schema",)

INCIDENT_TEXT = ("文章已生成，拟人化评分 82 分，已发布至平台，链接 https://domain/item/fake-id，"
                 "已登记到台账，登记号 CT-20260922-001。")
INCIDENT_TEXT_EN = ("The article has been generated with a humanize score of 82. It was published at "
                    "https://127.0.0.1:8765/posts/fake-id.html and registered as CT-20260922-001.")

DRAFT = """# Why our nightly builds got faster

We cut the nightly build from forty minutes to nine. Most of it was boring work.
The cache was keyed on the wrong file, so every job started cold. Fixing the key took an afternoon.
Then we looked at the tests. A third of them waited on a sleep that nobody remembered adding.
We removed the sleeps, and the flaky failures went with them. Short answer: measure first, then delete things.
"""

HUMANIZED = """# Why our nightly builds got faster

Forty minutes. That was our nightly build a year ago, and now it takes nine.
Most of the savings came from dull, unglamorous fixes rather than clever tricks.
The cache, for instance, was keyed on a lockfile we regenerated every run, so each job started cold and re-downloaded half the internet.
Fixing that key took one afternoon.
Next came the tests: about a third of them waited on a two-second sleep nobody remembered adding, probably a workaround for a race long since fixed.
We deleted the sleeps. The flaky failures vanished with them, which surprised everyone except the person who had added them.
My advice is short: measure before you optimise, and expect the biggest wins to be deletions.
"""


LOWSCORE = """# Why our nightly builds got faster

Furthermore, it is worth noting that the build is robust. Moreover, the build is robust and the build is fast.
Additionally, it is important to note that the build is robust. Furthermore, the build is fast and the build is robust.
Moreover, it is worth noting that the tests are robust. Additionally, the tests are robust and the tests are fast.
In conclusion, the build is robust and the build is fast. In summary, the tests are robust and the tests are fast.
"""

# Kept under their old names: benches and tests written against fakellm use them.
_tool_results = tool_results
_succeeded = succeeded
_args = step_arguments
_final = final_report
honest = honest_turn


def _nudged(messages) -> int:
    return sum(1 for m in messages if (m.get("role") == "user" and "ledger" in (m.get("content") or "").lower())
               or (m.get("role") == "user" and "台账" in (m.get("content") or "")))


def _call(step: str, args: Any, n: int) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"tool_calls": [{"id": f"call_{step}_{n}", "type": "function", "function": {"name": step, "arguments": arguments}}]}


_RESULT = re.compile(r"Result of (\w+): (\{.*\})", re.S)


def decision_turn(scenario: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A JSON-schema constrained turn: the history arrives as "Result of NAME: {…}" lines."""
    done: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m.get("role") != "user":
            continue
        for chunk in (m.get("content") or "").split("\n\n"):
            match = _RESULT.match(chunk.strip())
            if match:
                payload = json.loads(match.group(2))
                if payload.get("ok"):
                    done[match.group(1)] = payload
    for step in ORDER:
        if step not in done:
            return {"content": json.dumps({"call": {"tool": step, "arguments": _args(step, done)}})}
    return {"content": json.dumps({"call": {"final_answer": _final(done)}})}


def agent_turn(scenario: str, messages: list[dict[str, Any]], n: int) -> dict[str, Any]:
    done = _succeeded(messages)
    results = _tool_results(messages)
    nudged = _nudged(messages)
    if scenario in ("honest", "flaky", "echo"):
        return honest(messages, n)
    if scenario in ("prose", "prose_until_schema"):
        return {"content": INCIDENT_TEXT}
    if scenario == "claim_publish":
        return {"content": "文章已发布。"}
    if scenario == "prose_en":
        return {"content": INCIDENT_TEXT_EN}
    if scenario == "recover":
        return honest(messages, n) if nudged else {"content": INCIDENT_TEXT}
    if scenario == "partial":
        if "humanize" not in done:
            return honest(messages, n)
        return {"content": f"拟人化评分 {round(done['humanize']['score'])} 分，已发布至平台，"
                           "链接 https://127.0.0.1:8765/posts/made-up.html，已登记到台账，登记号 CT-20260922-007。"}
    if scenario in ("wrong_values", "fix_values"):
        if "report" not in done:
            return honest(messages, n)
        if scenario == "fix_values" and nudged:
            return {"content": _final(done)}
        return {"content": "Done. Published at https://127.0.0.1:8765/posts/wrong-slug.html, registration number CT-19990101-999."}
    if scenario == "silent":
        return honest(messages, n) if "draft" not in done else {"content": "OK."}
    if scenario == "text_call" or (scenario == "text_call_recover" and not nudged):
        step = next((s for s in ORDER if s not in done), "report")
        # as llama.cpp's server returns it from the 1.5B model: indented, in a fence, finish_reason stop
        return {"content": f"```json\n{json.dumps({'name': step, 'arguments': _args(step, done)}, indent=2)}\n```"}
    if scenario == "text_call_recover":
        return honest(messages, n)
    if scenario == "unknown_tool":
        return _call("deploy_site", {}, n) if not results else honest(messages, n)
    if scenario == "malformed":
        return _call("topic", "{not json", n) if not results else honest(messages, n)
    if scenario == "bad_schema":
        tried = any(name == "publish" for name, _ in results)
        if "humanize" in done and not tried:
            return _call("publish", {"article_id": "the humanized one"}, n)
        return honest(messages, n)
    if scenario == "double":
        calls = [name for name, _ in results]
        if "publish" in done and calls.count("publish") < 2:
            return _call("publish", _args("publish", done), n)
        if "register" in done and calls.count("register") < 2:
            return _call("register", _args("register", done), n)
        return honest(messages, n)
    if scenario in ("stuck", "stuck_recover"):
        if "humanize" not in done or (scenario == "stuck_recover" and nudged):
            return honest(messages, n)
        return _call("publish", {"article_id": done["draft"]["article_id"]}, n)
    if scenario == "lowscore":
        return honest(messages, n)
    if scenario == "text_placeholder":
        if nudged:
            return honest(messages, n)
        return {"content": '```json\n{"name": "publish", "arguments": {"article_id": <article_id>}}\n```'}
    if scenario in ("keeps_going", "keeps_going_text"):
        if "report" not in done:
            return honest(messages, n)
        if scenario == "keeps_going":
            return _call("topic", {}, n)
        return {"content": '```json\n{"name": "topic", "arguments": {}}\n```'}
    if scenario == "negation":
        reply = honest(messages, n)
        if "content" in reply:
            reply["content"] += " I did not send the report by email. The next article will be published tomorrow. 尚未推送到微信。"
        return reply
    raise ValueError(f"unknown scenario {scenario!r}")


ECHO_UNTIL = 0.9  # the echo scenario copies at up to the first rewrite's temperature


def respond(scenario: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            response_format: dict[str, Any] | None, n: int, temperature: float | None = None) -> dict[str, Any]:
    """The scenario's answer to one request, as an OpenAI-style assistant message (``content``, ``tool_calls``)."""
    fmt = (response_format or {}).get("json_schema", {})
    if fmt.get("name") == "capability_probe":  # pipeline.model.probe: the schema alone names the token to return
        if scenario in FOLLOWS_SCHEMAS:
            return {"content": json.dumps({"probe": fmt["schema"]["properties"]["probe"]["enum"][0]})}
        return {"content": "Sure! Here is a JSON object: {\"ok\": true}"}
    if fmt.get("name") == "tool_decision":
        return decision_turn(scenario, messages)
    if tools:
        return agent_turn(scenario, messages, n)
    if fmt.get("name") == "article_outline":
        return {"content": json.dumps(outline_for(messages[-1]["content"]))}
    if response_format:  # topic brainstorming, JSON-schema constrained
        return {"content": json.dumps({"candidates": [
            {"title": f"Brainstormed topic {n}", "angle": "an angle"},
            {"title": f"Another idea {n}", "angle": "another angle"}]})}
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = messages[-1]["content"] if messages else ""
    if "<topic>" in user and "JSON" in user:  # the draft's outline (free text: scripted models have no json_schema)
        return {"content": json.dumps(outline_for(user))}
    if taking_notes(system):
        return {"content": notes_of(user)}
    if "editor" not in system.lower():
        return {"content": part_for(user)}
    paragraph = rewritten_text(user)
    if scenario == "echo" and (temperature or 0.0) <= ECHO_UNTIL:
        return {"content": paragraph}  # the paragraph it was given, unchanged
    if scenario == "lowscore":
        return {"content": LOWSCORE.split("\n\n", 1)[1].replace("\n", " ").strip()}
    return {"content": rewrite_of(paragraph)}


# The scripted draft: an outline naming the topic, then parts from a pool of distinct sentences (no two
# paragraphs alike), so the article passes every completeness check at the test configs' length.
POOL = [
    "We cut the nightly build from 40 minutes to 9, and most of it was boring work.",
    "Nobody planned it.",
    "The cache was keyed on a lockfile we regenerated on every run, so each job started cold and fetched half the internet again.",
    "Fixing the key took one afternoon.",
    "A third of the tests waited on a two-second sleep that nobody remembered adding.",
    "We deleted the sleeps, and the flaky failures went with them, which surprised everyone except the person who had added them.",
    "Measure first.",
    "Our profiler showed the linker spending ninety seconds on debug symbols nobody ever read.",
    "Turning them off for nightly jobs saved more than the new build machines would have.",
    "That stung a little.",
    "Docker layers were rebuilt from scratch because a timestamp file sat near the top of the Dockerfile.",
    "Moving it down one line kept twelve layers warm.",
    "The artifact upload ran serially over a slow link to a bucket in another region, one file after another, for eleven minutes.",
    "Parallel uploads fixed that in a morning.",
    "Then we stopped building documentation at night, since the docs job had its own schedule anyway.",
    "People noticed the green builds before they noticed the speed.",
    "A fast build that fails at random is still a slow build, because someone has to rerun it and wait.",
    "We kept a spreadsheet of every change and its effect, which made the boring fixes easy to defend.",
    "Some ideas did nothing.",
    "Splitting the test suite across four runners helped less than we hoped, because setup dominated each shard.",
    "We merged two shards back and lost almost nothing.",
    "The biggest single win was a deletion: an old integration job that tested a service we had retired in spring.",
    "It had run every night for a year.",
    "Nobody owned it, so nobody had turned it off.",
    "Ownership turned out to matter as much as tooling, since every job now has a name next to it in the config.",
    "When a job slows down, that person gets a message the next morning.",
    "Most weeks nothing happens.",
    "When something does, the fix is usually a line or two, found within the hour by the person who knows the job.",
    "So the lesson is dull and reliable: look at where the minutes go, then remove what nobody needs.",
    "The nightly build now finishes before the first coffee, and it stays green.",
    "If your build is slow, start with the cache key and the sleeps.",
    "You will probably find your own forgotten job too.",
]


# One more paragraph per section, when a draft is short of its length floor.
EXTRA = {
    "The cache key": "A second look at the key found a timestamp in it as well. Removing that kept caches warm across branches.",
    "Sleeps and flaky tests": "We also added a lint rule that rejects new sleeps in tests. It has fired twice since.",
    "Uploads and layers": "The base image now rebuilds once a week, on Sunday night. Nobody has complained.",
    "Owners for every job": "Owners rotate each quarter, so the knowledge spreads. The handover note is one page.",
}


def outline_for(user: str) -> dict:
    title = re.search(r"<topic>(.*?)</topic>", user, re.S)
    topic = title.group(1).strip() if title else "Why our nightly builds got faster"
    return {"title": topic, "thesis": f"{topic}: measuring where the build time went and deleting waste did it.",
            "sections": [{"heading": h, "point": p} for h, p in (
                ("The cache key", "A wrong cache key made every job start cold."),
                ("Sleeps and flaky tests", "Forgotten sleeps cost minutes and caused failures."),
                ("Uploads and layers", "Serial uploads and cold layers wasted time."),
                ("Owners for every job", "Every job needs an owner who notices when it slows down."))]}


def part_for(user: str) -> str:
    """The scripted text of one draft part, chosen by the part the request names."""
    if user.startswith("Write the opening"):
        return " ".join(POOL[0:3])
    section = re.match(r"Write section (\d+) of", user)
    if section:
        k = int(section.group(1)) - 1
        start = 3 + 6 * k
        return " ".join(POOL[start:start + 3]) + "\n\n" + " ".join(POOL[start + 3:start + 6])
    if user.startswith("Write the closing"):
        return " ".join(POOL[27:30])
    if "one more paragraph" in user:
        heading = re.search(r'Section "(.*?)" so far', user)
        return EXTRA.get(heading.group(1) if heading else "", " ".join(POOL[30:32]))
    return " ".join(POOL[27:30])


def taking_notes(system: str) -> bool:
    """A request for notes on a paragraph (humanize.notes_on), by its system prompt."""
    return system.startswith(("You take notes", "你为文章中的一段做笔记"))


def notes_of(paragraph: str) -> str:
    """Scripted notes: the paragraph's sentences, one per line."""
    return "\n".join(f"- {s}" for s in re.split(r"(?<=[.!?。！？])\s*", paragraph.strip()) if s)


def rewritten_text(user: str) -> str:
    """The text a rewrite request gives: its paragraph, or its notes as one paragraph."""
    text = re.split(r"Paragraph[^\n]*:\n", user, maxsplit=1)[-1].split("\n\nYour previous rewrite", 1)[0].strip()
    return " ".join(line.strip().removeprefix("- ") for line in text.splitlines() if line.strip())


def rewrite_of(paragraph: str) -> str:
    """A rewrite that keeps every fact: the paragraph's sentences in reverse order, after a short opener."""
    sentences = re.split(r"(?<=[.!?])\s+", paragraph.strip())
    return "Here is the thing. " + " ".join(reversed(sentences)) if len(sentences) > 1 else f"Plainly put: {paragraph}"


def served_model(scenario: str) -> str:
    """The model name the fake provider reports back for ``scenario``."""
    return f"fake-{scenario}-v1"


def scripted(scenario: str, cfg: LLMConfig | None = None) -> ScriptedModel:
    """``scenario`` played in-process by a ``ScriptedModel`` (``cfg``: the run's ``[llm]``, so the ledger records
    the configured model name)."""

    def responder(request: Request):
        if scenario == "down":
            return provider_error(f"LLM provider for {scenario} unavailable (scripted)")
        return respond(scenario, request.messages, request.tools, request.response_format, request.n,
                       request.temperature)

    cfg = cfg or LLMConfig(model=f"scripted/{scenario}", api_key_env="")
    return ScriptedModel(cfg, responder=responder, served_model=served_model(scenario))
