"""Plan, then write; the completeness checks; rewrites where the score says (issue 22). ScriptedModel only."""

from __future__ import annotations

import json
import re

import pytest
from sqlmodel import select

from pipeline import config
from pipeline.capabilities import draft, humanize
from pipeline.errors import AgentIncompleteError, AwaitingReview, CapabilityError, ExitCode
from pipeline.ledger.models import Article, Outline, Review, Topic
from pipeline.ledger.writer import Ledger
from pipeline.model.llm import Reply
from pipeline.score import scoring
from pipeline.sources import gather
from pipeline.testing import Request, ScriptedModel
from pipeline.text import article as art
from pipeline.tools.prompts import Prompts
from pipeline.tools.toolbox import RunContext

from scenarios import POOL, notes_of, outline_for, part_for, rewrite_of, rewritten_text, taking_notes
from support import SOURCED_BACKLOG

TOPIC = "Why our nightly builds got faster"


def make_ctx(tmp_path, responder=None, json_schema=False, **env):
    env = {"PIPELINE_LEDGER__URL": f"sqlite:///{tmp_path}/ledger.db", "PIPELINE_DRAFT__TARGET_WORDS": "240",
           "PIPELINE_PUBLISH__PREVIEW_DIR": str(tmp_path / "preview"), **env}
    cfg = config.load(None, environ=env)
    cfg.base_dir = tmp_path
    cfg.llm = cfg.llm.model_copy(update={"json_schema": json_schema})
    ledger = Ledger(cfg.ledger_url)
    ctx = RunContext(ledger.start_run("m").id, cfg.run_settings(), ledger, ScriptedModel(cfg.llm, responder=responder), Prompts())
    return ctx


def add_topic(ctx, title=TOPIC, sources=None) -> int:
    """A topic of this run, written from ``sources`` (by default the scripted model's notes, in the title's language:
    its draft's every figure and name is in them)."""
    if sources is None:
        sources = [SOURCED_BACKLOG.parent / ("notes.zh.md" if re.search(r"[\u4e00-\u9fff]", title) else "notes.md")]
    with ctx.ledger.write() as s:
        t = Topic(run_id=ctx.run_id, title=title, normalized=title.lower(), source="backlog")
        s.add(t)
    gather.store(ctx.ledger, t.id, gather.gather([str(p) for p in sources], SOURCED_BACKLOG.parent, 5))
    return t.id


def writer(overrides=None):
    """A responder for draft calls: the scripted parts, except where ``overrides(request)`` answers."""
    def respond(request: Request):
        user = request.messages[-1]["content"]
        if overrides is not None:
            got = overrides(request, user)
            if got is not None:
                return got
        if "<topic>" in user:
            return json.dumps(outline_for(user))
        return part_for(user)
    return respond


def outline_requests(ctx):
    return [r.messages[-1]["content"] for r in ctx.llm.requests if "<topic>" in r.messages[-1]["content"]]


def drafted_outline(tmp_path, answer):
    """A draft written with ``answer`` as the scripted writer: its context, result and stored outline."""
    ctx = make_ctx(tmp_path, writer(answer))
    result = draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        [outline] = s.exec(select(Outline).where(Outline.run_id == ctx.run_id)).all()
    return ctx, result, outline


def drafted_asks(tmp_path, overrides, starting: str) -> tuple[list[str], str]:
    """A draft written with ``overrides``: the requests that start with ``starting``, and the stored body."""
    ctx = make_ctx(tmp_path, writer(overrides))
    draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        body = s.exec(select(Article)).one().body
    return [r.messages[-1]["content"] for r in ctx.llm.requests if r.messages[-1]["content"].startswith(starting)], body


def section_requests(ctx):
    return [r for r in ctx.llm.requests if r.messages[0]["role"] == "system"]


# --- plan, then write ------------------------------------------------------------------------

def test_the_draft_is_planned_then_written_section_by_section(tmp_path):
    ctx = make_ctx(tmp_path, writer(), json_schema=True)
    result = draft.draft.fn(ctx, add_topic(ctx))
    outline_request = ctx.llm.requests[0]
    assert outline_request.response_format["json_schema"]["name"] == "article_outline"
    schema = outline_request.response_format["json_schema"]["schema"]
    # At most the configured sections ([draft] sections = 4): allowed 6, the embedded model gave 6 short ones.
    assert schema["properties"]["sections"]["minItems"] == 3 and schema["properties"]["sections"]["maxItems"] == 4
    assert draft.outline_schema(6)["properties"]["sections"]["maxItems"] == 6 and draft.OUTLINE_SCHEMA["properties"][
        "sections"]["maxItems"] == 6
    # The thesis and each point are one sentence by the grammar (make run, 2026-12-05: two or three sentences a
    # point, 306 tokens, every sentence after the first cut off afterwards).
    one = re.compile(schema["properties"]["sections"]["items"]["properties"]["point"]["pattern"])
    assert schema["properties"]["thesis"] == schema["properties"]["sections"]["items"]["properties"]["point"]
    assert one.match("Caching cut the build from 40 to 12 minutes on Python 3.11.") and one.match("缓存让构建快了三倍。")
    assert not one.match("Caching cut the build. Then we split it.") and not one.match("先缓存。再拆分。")
    assert not one.match('A "quoted" point') and not one.match("two\\nlines")
    parts = section_requests(ctx)
    assert len(parts) == 6  # opening, four sections, closing: each its own call
    # One system turn for all of them (the model's prompt cache reuses it), the outline in it.
    assert len({r.messages[0]["content"] for r in parts}) == 1 and "Sleeps and flaky tests" in parts[0].system
    assert all(r.max_tokens and r.max_tokens < 600 for r in parts)
    # Each section sees the end of the part before it.
    assert POOL[2][-40:] in parts[1].messages[-1]["content"]
    with ctx.ledger.read() as s:
        [outline] = s.exec(select(Outline).where(Outline.run_id == ctx.run_id)).all()
        row = s.get(Article, result["article_id"])
    assert outline.constrained and len(json.loads(outline.sections_json)) == 4 and row.outline_id == outline.id
    assert row.body.count("\n## ") == 4 and json.loads(row.checks_json)["passed"] is True
    assert result["words"] >= 210


def test_an_off_topic_outline_title_is_replaced_by_the_topic(tmp_path):
    def off(request, user):
        if "<topic>" in user:
            return json.dumps({**outline_for(user), "title": "The Boring Fixes Strategy"})
        return None
    ctx = make_ctx(tmp_path, writer(off))
    result = draft.draft.fn(ctx, add_topic(ctx))
    assert result["title"] == TOPIC


def test_a_thesis_that_opens_by_describing_the_post_keeps_its_claim_and_is_not_asked_again(tmp_path):
    # make run, 2026-12-04: "This blog post explores …" in three outline attempts, told why each time; the draft
    # was lost (52 s) and the agent started again from a new outline.
    def about_itself(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        plan["thesis"] = "This blog post explores how a cache key and a few deleted sleeps cut our nightly build."
        plan["sections"][1]["point"] = "This post shows that parallel uploads saved eleven minutes."
        return json.dumps(plan)
    ctx, _, outline = drafted_outline(tmp_path, about_itself)
    assert len(outline_requests(ctx)) == 1
    assert outline.thesis == "How a cache key and a few deleted sleeps cut our nightly build."
    assert json.loads(outline.sections_json)[1]["point"] == "Parallel uploads saved eleven minutes."
    assert draft.claim_of("本文探讨了缓存键和并行上传如何缩短夜间构建。") == "缓存键和并行上传如何缩短夜间构建。"
    # the same run's next outline: "In this blog post, we explore …" passed as a thesis, and the opening said "This
    # blog post will …"
    assert draft.claim_of("In this blog post, we explore the practical steps that sped up nightly builds.") == \
        "The practical steps that sped up nightly builds."
    assert ("meta-text", "line 5") in checks(GOOD.replace("Each job started cold.", "In this post, we explore the cold start."))
    with pytest.raises(ValueError, match="meta-text"):  # nothing left to claim: refused, as before
        draft.parse_outline(json.dumps({**outline_for("<topic>x</topic>"), "thesis": "This post explores it."}))


def test_an_outline_with_an_introduction_or_a_thesis_about_the_post_is_fixed_or_asked_again(tmp_path):
    answers = []

    def framed(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        if not answers:  # first answer: a thesis about the post itself (seen on the embedded model)
            plan["thesis"] = "In this blog post, we'll explore the fixes that made our builds faster."
        plan["sections"] = [{"heading": "Introduction", "point": "Builds were slow."}, *plan["sections"],
                            {"heading": "Conclusion", "point": "Measure first."}]
        answers.append(plan)
        return json.dumps(plan)
    ctx, _, outline = drafted_outline(tmp_path, framed)
    outline_asks = outline_requests(ctx)
    assert len(outline_asks) == 2 and "not meta-text" in outline_asks[1]
    headings = [x["heading"] for x in json.loads(outline.sections_json)]
    assert "Introduction" not in headings and "Conclusion" not in headings and len(headings) == 4


def test_an_outline_with_one_heading_for_several_sections_is_asked_again(tmp_path):
    # Seen on the embedded model (make run, 2026-12-03): "The Cost of Flaky Tests" as sections 2, 3 and 4.
    answers = []

    def repeated(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        if not answers:
            for s in plan["sections"][2:]:
                s["heading"] = plan["sections"][1]["heading"]
        answers.append(plan)
        return json.dumps(plan)
    ctx = make_ctx(tmp_path, writer(repeated))
    result = draft.draft.fn(ctx, add_topic(ctx))
    outline_asks = outline_requests(ctx)
    assert len(outline_asks) == 2 and "the same heading" in outline_asks[1] and result["checks"] == "passed"
    twice = GOOD.replace("## Sleeps", "## The cache key")
    assert ("repeated heading", f"line {twice.splitlines().index('## The cache key', 5) + 1}") in checks(twice)


def test_an_outline_point_given_as_a_paragraph_is_kept_to_its_claim_and_a_point_made_twice_is_asked_again(tmp_path):
    # Seen on the embedded model (make run, 2026-12-03): each point a paragraph of four sentences, the last two
    # sections' points word for word the same. Every part's prompt carried them; the sections restated one another.
    answers = []

    def padded(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        for s in plan["sections"]:
            s["point"] += " This tool was developed by our team and was tested extensively before being implemented." \
                          " The faster builds allowed the software to be updated more frequently."
        if not answers:
            plan["sections"][3]["point"] = plan["sections"][2]["point"].replace("wasted time", "wasted our time")
        else:  # two claims about different things in the same words are two points
            plan["sections"][3]["point"] = plan["sections"][2]["point"].replace("Serial uploads and cold layers",
                                                                                "Owners without alerts")
        answers.append(plan)
        return json.dumps(plan)
    ctx, result, outline = drafted_outline(tmp_path, padded)
    outline_asks = outline_requests(ctx)
    assert len(outline_asks) == 2 and "make the same point" in outline_asks[1] and result["checks"] == "passed"
    points = [x["point"] for x in json.loads(outline.sections_json)]
    assert points[:3] == [x["point"] for x in outline_for(TOPIC)["sections"]][:3]
    assert points[3] == "Owners without alerts wasted time."
    assert not draft._same_point("缓存可以显著减少构建时间。", "并行可以显著减少构建时间。")  # bench: refused three times
    assert "tested extensively" not in section_requests(ctx)[0].system


def test_an_outline_point_that_repeats_a_long_run_of_an_earlier_point_is_kept_to_its_own_clause(tmp_path):
    # make run, 2026-12-05 (Chinese): three points ended "，因为开发人员需要不断地调试和修复测试代码，以确保测试结果能够重现";
    # each section wrote the tail again and three sections were deleted as repeats.
    tail = "，因为开发人员需要不断地调试和修复测试代码，以确保测试结果能够重现。"
    earlier = ["不稳定的测试会浪费大量的开发时间" + tail]
    assert draft.before_shared("不稳定的测试会让团队不再相信构建结果" + tail, earlier, "zh") == "不稳定的测试会让团队不再相信构建结果。"
    assert draft.before_shared("团队付出代价" + tail, earlier, "zh") == "团队付出代价" + tail  # too little left
    assert draft.before_shared("重试掩盖了真正的问题。", earlier, "zh") == "重试掩盖了真正的问题。"
    shared = ", because developers have to keep debugging and fixing the test code to make results repeatable."

    def same_tail(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        for s in plan["sections"][1:]:
            s["point"] = s["point"].rstrip(".") + shared
        return json.dumps(plan)
    ctx, _, outline = drafted_outline(tmp_path, same_tail)
    assert len(outline_requests(ctx)) == 1
    points = [x["point"] for x in json.loads(outline.sections_json)]
    want = [x["point"] for x in outline_for(TOPIC)["sections"]]
    assert points[:2] == [want[0], want[1].rstrip(".") + shared] and points[2:] == want[2:]
    assert "keep debugging" not in section_requests(ctx)[0].system.split("Serial uploads")[1]


def test_the_end_of_a_part_shown_to_the_next_starts_at_a_sentence_not_inside_a_label():
    # bench, 2026-12-06 (Chinese): the 160 characters shown began '*：频繁的测试失败…', the end of a bold label cut at a
    # character; the next paragraph began '*：在我们团队中…' and was published so.
    section = ("**开发效率低下**：不稳定的测试会频繁地导致代码的测试失败。**团队成员流失**：频繁的测试失败会导致团队成员对测试的依赖增加，"
               "他们可能会感到压力大，从而影响他们的工作表现和团队的凝聚力。\n\n长期来看，这可能会导致团队成员的流失，影响团队的稳定性和长期发展。"
               "**项目延期**：不稳定的测试会导致项目延期，因为开发团队需要花费更多的时间来解决测试问题，这可能会导致项目进度的延误，影响到项目的最终交付。")
    tail = draft._tail(section)
    assert tail.startswith("长期来看") and tail.endswith("影响到项目的最终交付。") and len(tail) <= draft.TAIL
    english = " ".join(POOL[3:8])
    tail = draft._tail(english)
    assert tail[0].isupper() and english.endswith(tail) and len(tail) <= draft.TAIL
    assert draft._tail(POOL[3]) == POOL[3]  # short enough: all of it


def test_a_section_cut_by_max_tokens_is_continued_from_its_last_sentence(tmp_path):
    cut_text = POOL[3] + " " + POOL[4] + "\n\n" + POOL[5] + " The linker spent ninety sec"

    def cut(request, user):
        if user.startswith("Write section 1 of") and "You stopped here" not in user:
            return Reply(text=cut_text, finish_reason="length")
        if "You stopped here" in user:
            return "Turning debug symbols off saved more than new machines would have. That stung."
        return None
    ctx = make_ctx(tmp_path, writer(cut))
    result = draft.draft.fn(ctx, add_topic(ctx))
    [continued] = [r for r in ctx.llm.requests if "You stopped here" in r.messages[-1]["content"]]
    asked = continued.messages[-1]["content"]
    assert POOL[5] in asked and "The linker spent ninety sec" not in asked  # continued from the last complete sentence
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert "ninety sec" not in body and POOL[5] + " Turning debug symbols off" in body


@pytest.mark.parametrize("joiner", ["\n\n", " "])  # two paragraphs, or one run-on paragraph (split in two)
def test_a_section_that_ran_on_past_its_length_ends_at_its_last_complete_sentence(tmp_path, joiner):
    # Seen in Chinese on the embedded model: sections ran on past twice their length, cut, continued three deep, cut
    # again, then rewritten: 28 calls and the step's deadline. A part that already has its length ends there.
    ran = ["The mirror sat in another region.", "Every job fetched four hundred packages from it.",
           "Nobody had looked at that log line in a year.", "We pinned a local proxy in front of it.",
           "Fetch time fell from six minutes to forty seconds.", "The proxy cost less than one build machine.",
           "Then the test images got the same treatment.", "Their layers had been pulled cold each night.",
           "A warm registry cache kept them on the runners.", "That saved another three minutes.",
           "We wrote both numbers on the team board.", "Nobody argued with the board after that week."]
    long_text = " ".join(ran[:6]) + joiner + " ".join(ran[6:]) + " And then the linker"

    def ran_on(request, user):
        if user.startswith("Write section 1 of"):
            return Reply(text=long_text, finish_reason="length")
        return None
    ctx = make_ctx(tmp_path, writer(ran_on))
    result = draft.draft.fn(ctx, add_topic(ctx))
    assert not any("You stopped here" in r.messages[-1]["content"] for r in ctx.llm.requests)
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert ran[11] in body and "And then the linker" not in body


def test_a_section_still_cut_after_its_continuations_is_rewritten_never_trimmed(tmp_path):
    def always_cut(request, user):
        if user.startswith("Write section 2 of") and "rejected" not in user:
            return Reply(text="Sleeps cost us minutes and the", finish_reason="length")
        return None
    ctx = make_ctx(tmp_path, writer(always_cut))
    result = draft.draft.fn(ctx, add_topic(ctx))
    retried = [r for r in ctx.llm.requests if r.messages[-1]["content"].startswith("Write section 2 of")
               and "rejected: it was cut off" in r.messages[-1]["content"]]
    assert retried
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert "minutes and the" not in body and POOL[9] in body


def test_a_truncated_section_fails_the_step_saying_where(tmp_path):
    ctx = make_ctx(tmp_path, writer(lambda r, u: Reply(text=POOL[3] + "\n\nThe cache was keyed on",
                                                       finish_reason="length") if u.startswith("Write section 3 of") else None))
    with pytest.raises(CapabilityError) as info:
        draft.draft.fn(ctx, add_topic(ctx))
    message = str(info.value)
    assert "completeness checks" in message and "Uploads and layers" in message
    with ctx.ledger.read() as s:
        assert s.exec(select(Article).where(Article.run_id == ctx.run_id)).first() is None  # nothing stored


def test_a_dangling_heading_fails_the_step(tmp_path):
    ctx = make_ctx(tmp_path, writer(lambda r, u: "" if u.startswith("Write section 2 of") else None))
    with pytest.raises(CapabilityError, match=r"dangling heading \(line \d+\): the heading 'Sleeps and flaky tests'"):
        draft.draft.fn(ctx, add_topic(ctx))


def test_a_preamble_fails_the_step(tmp_path):
    preamble = "Sure, here's the opening paragraph you asked for about the nightly build and why it matters to us."
    ctx = make_ctx(tmp_path, writer(lambda r, u: preamble if u.startswith("Write the opening") else None))
    with pytest.raises(CapabilityError, match=r"meta-text \(line 1\): a preamble"):
        draft.draft.fn(ctx, add_topic(ctx))
    # The opening was asked for again, told why: what it said, and what to do, not the check's name (told "meta-text",
    # the embedded model wrote "the presence of meta-text in the build script" into the article; make run, 2026-12-04).
    retries = [r.messages[-1]["content"] for r in ctx.llm.requests if r.messages[-1]["content"].startswith("Write the opening")][1:]
    assert retries and all("it talks about the writing, not the subject ('Sure, here's" in r for r in retries)
    assert not any("meta-text" in r for r in retries)


def test_a_short_draft_gets_more_paragraphs_until_the_floor(tmp_path):
    ctx = make_ctx(tmp_path, writer(), PIPELINE_DRAFT__TARGET_WORDS="480")  # floor 420: the parts give ~380
    result = draft.draft.fn(ctx, add_topic(ctx))
    assert any("one more paragraph" in r.messages[-1]["content"] for r in ctx.llm.requests)
    assert result["words"] >= 420


def test_a_draft_just_over_the_floor_is_lengthened_to_leave_the_rewrites_room(tmp_path):
    # make run, 2026-12-05: a 705-word draft (floor 700); two of its four rewrites were rejected because each,
    # a little shorter than its paragraph, took the article under the floor ("691 < 700").
    ctx = make_ctx(tmp_path, writer(), PIPELINE_DRAFT__TARGET_WORDS="440")  # floor 385; the parts give ~390
    topic_id = add_topic(ctx)
    with ctx.ledger.read() as s:
        outline = draft._outline(ctx, s.get(Topic, topic_id))
    body, _ = draft.Writer(ctx, outline).article()
    assert sum("one more paragraph" in r.messages[-1]["content"] for r in ctx.llm.requests) == 1
    assert art.body_length(body, "en") >= 385 + int(440 * draft.REWRITE_ROOM)


def prose_of(words: int, rng) -> str:
    """``words`` words of distinct ten-word sentences in three paragraphs (no sentence near another)."""
    vocabulary = ["".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(3)) for _ in range(3000)]
    sentences = [" ".join(rng.choice(vocabulary) for _ in range(10)).capitalize() + "." for _ in range(max(3, words // 10))]
    third = max(1, len(sentences) // 3)
    return "\n\n".join(" ".join(sentences[i:i + third]) for i in range(0, len(sentences), third))


def test_the_length_a_part_is_asked_for_follows_what_the_model_writes(tmp_path):
    # A model that writes two thirds of what it is asked (the embedded one, measured): asked for each part's
    # share of 800 words, it gave ~540, and six lengthening calls followed. Measured as it writes, the later parts
    # are asked for more, and the draft reaches its length with no lengthening call.
    import random
    rng = random.Random(22)

    def two_thirds(request, user):
        if "<topic>" in user:
            return None
        asked = int(re.search(r"about (\d+) words", user).group(1))
        return prose_of(asked * 2 // 3, rng)
    ctx = make_ctx(tmp_path, writer(two_thirds), PIPELINE_DRAFT__TARGET_WORDS="800")
    topic_id = add_topic(ctx)
    with ctx.ledger.read() as s:
        outline = draft._outline(ctx, s.get(Topic, topic_id))
    w = draft.Writer(ctx, outline)
    body, _ = w.article()
    asked = [int(re.search(r"about (\d+) words", r.messages[-1]["content"]).group(1)) for r in section_requests(ctx)]
    assert asked[0] == w.opening_n and asked[1] > w.per_section * 1.3  # the opening measured the model
    assert not any("one more paragraph" in r.messages[-1]["content"] for r in ctx.llm.requests)
    assert art.body_length(body, "en") >= 700
    assert 0.6 <= w.yield_() <= 0.75


def test_the_length_floor_is_measured_after_an_extensions_repeated_sentences_are_gone(tmp_path):
    # bench, 2026-12-03 (Chinese): two extensions reached the floor counting sentences said before; deleted
    # afterwards, they left the draft 92 characters short with four extensions unspent.
    import random
    rng = random.Random(5)

    def repeating(request, user):
        if "one more paragraph" not in user:
            return None
        return " ".join([POOL[4], POOL[10], POOL[16], POOL[22], prose_of(10, rng).split(". ")[0] + "."])
    ctx = make_ctx(tmp_path, writer(repeating), PIPELINE_DRAFT__TARGET_WORDS="520")  # floor 455: the parts give 417
    topic_id = add_topic(ctx)
    with ctx.ledger.read() as s:
        outline = draft._outline(ctx, s.get(Topic, topic_id))
    w = draft.Writer(ctx, outline)
    body, _ = w.article()
    assert art.body_length(body, "en") >= 455 and body.count(POOL[4]) == 1


def test_a_section_whose_extension_adds_nothing_is_not_asked_again(tmp_path):
    # bench, 2026-12-03 (Chinese): the last four extensions went to one section, the same reply each time, each
    # deleted as a repeat; the draft failed its length with the other sections never asked.
    def stuck(request, user):
        if "one more paragraph" in user and 'Section "The cache key"' in user:
            return " ".join(POOL[3:6])  # section 1's first paragraph again
        return None
    ctx = make_ctx(tmp_path, writer(stuck), PIPELINE_DRAFT__TARGET_WORDS="480")  # floor 420: the parts give ~380
    result = draft.draft.fn(ctx, add_topic(ctx))
    asked = [re.search(r'Section "(.*?)" so far', r.messages[-1]["content"]).group(1) for r in ctx.llm.requests
             if "one more paragraph" in r.messages[-1]["content"]]
    assert asked.count("The cache key") == 1 and len(set(asked)) > 1 and result["words"] >= 420


def test_an_extension_that_writes_its_section_back_keeps_only_what_is_new(tmp_path):
    # A Chinese draft on the embedded model (2026-12-03): shown the whole section to lengthen, it wrote the section
    # back word for word and added one sentence, four times; each reply was dropped as a repeat and the draft
    # failed its length. The prompt now shows the section's end only, asks about one angle in turn, and what an
    # extension says again is dropped from it before it is judged.
    import random
    rng = random.Random(9)
    fresh: list[str] = []

    def copies(request, user):
        if "one more paragraph" not in user:
            return None
        heading = re.search(r'Section "(.*?)" so far', user).group(1)
        k = [x["heading"] for x in outline_for("")["sections"]].index(heading)
        new = prose_of(40, rng).replace("\n\n", " ")
        fresh.append(new)
        start = 3 + 6 * k
        return " ".join(POOL[start:start + 3]) + "\n\n" + " ".join(POOL[start + 3:start + 6]) + "\n\n" + new
    ctx = make_ctx(tmp_path, writer(copies), PIPELINE_DRAFT__TARGET_WORDS="480")  # floor 420: the parts give ~380
    result = draft.draft.fn(ctx, add_topic(ctx))
    asks = [r.messages[-1]["content"] for r in ctx.llm.requests if "one more paragraph" in r.messages[-1]["content"]]
    assert asks and result["words"] >= 420
    with ctx.ledger.read() as s:
        body = s.exec(select(Article)).one().body
    counted = [i for i in range(3, 27) if art.sentence_key(POOL[i], "en") is not None]  # "Measure first." may recur
    assert [body.count(POOL[i]) for i in counted] == [1] * len(counted)  # the copied paragraphs are not in it twice
    assert any(new[:60] in body for new in fresh)  # what the extension added is
    first_paragraph = " ".join(POOL[3:6])
    assert not any(first_paragraph in a for a in asks)  # shown the end of the section, not all of it
    angles = Prompts().table("parts.en.toml")["angles"]
    assert len({next(a for a in angles if a in ask) for ask in asks}) == len(asks) or len(asks) > len(angles)


def test_a_section_left_empty_by_its_repeats_is_written_again_told_why(tmp_path):
    # A Chinese draft (2026-12-03): a section said only what earlier ones had, every sentence was deleted, and the
    # lengthening call showed the model an empty section to continue ("…一节目前的结尾是：“”").
    def echoing(request, user):
        if user.startswith("Write section 3 of") and "repeated the article" not in user:
            return part_for("Write section 1 of 4")
        return None
    ctx = make_ctx(tmp_path, writer(echoing), PIPELINE_DRAFT__TARGET_WORDS="480")
    result = draft.draft.fn(ctx, add_topic(ctx))
    asks = [r.messages[-1]["content"] for r in ctx.llm.requests]
    assert any(a.startswith("Write section 3 of") and "repeated the article" in a for a in asks)
    assert not any('so far ends: ""' in a for a in asks)
    with ctx.ledger.read() as s:
        body = s.exec(select(Article)).one().body
    assert POOL[15] in body and result["words"] >= 420  # section 3's own text


def test_a_section_left_one_paragraph_by_a_repeat_gets_a_second_paragraph_not_a_new_section(tmp_path):
    # make run, 2026-12-04: a Chinese section's second paragraph repeated the article and was deleted; the section
    # was written again whole, with the same repeats, twice, and the draft was lost after 191 s.
    said = art.sentences(part_for("Write the opening"))[0]

    def repeating(request, user):
        if user.startswith("Write section 2 of"):
            return f"{part_for(user).split(chr(10) * 2)[0]}\n\n{said}"
        return None
    ctx = make_ctx(tmp_path, writer(repeating))
    result = draft.draft.fn(ctx, add_topic(ctx))
    asks = [r.messages[-1]["content"] for r in ctx.llm.requests]
    assert result["checks"] == "passed"
    assert sum(a.startswith("Write section 2 of") for a in asks) == 1  # not written again
    with ctx.ledger.read() as s:
        row = s.exec(select(Article)).one()
    repairs = json.loads(row.checks_json)["repairs"]
    assert {"part": "section 2", "dropped": said[:120]} in repairs
    assert any(r["part"] == "section 2" and "added" in r for r in repairs)
    assert row.body.count(said) == 1


def test_a_closing_deleted_whole_as_repeats_is_written_again(tmp_path):
    # bench, 2026-12-03 (Chinese): every sentence of the closing repeated an earlier one, the closing was deleted,
    # and the article ended inside its last section; the check passed it (a paragraph ends it either way).
    def repeating(request, user):
        if user.startswith("Write the closing") and "repeated the article" not in user:
            return " ".join(POOL[3:6])
        return None
    closings, body = drafted_asks(tmp_path, repeating, "Write the closing")
    assert len(closings) == 2 and "repeated the article" in closings[1]
    assert body.endswith(" ".join(POOL[27:30]))


def test_a_one_sentence_opening_is_continued_where_it_stops_not_written_again(tmp_path):
    # bench, 2026-12-03: the embedded model answered the opening with one 17-word sentence; the part passed its own
    # check, the article failed "opening (≥ 20 words)", and the draft failed three times in a row. Then told its
    # length, it gave the outline's thesis back, one 18-word sentence, four times, and the draft was lost (bench,
    # 2026-12-04). A sound short opening is continued, as a cut part is.
    short = "Our nightly builds went from forty minutes to twelve after a few boring fixes."
    def terse(request, user):
        if user.startswith("Write the opening") and "You stopped here" not in user:
            return short
        return None
    openings, body = drafted_asks(tmp_path, terse, "Write the opening")
    assert len(openings) == 2 and f"You stopped here:\n{short}" in openings[1]
    assert not any("first paragraph has" in a for a in openings)
    assert body.startswith(f"{short} ") and not [c for c, _ in checks(body) if c == "opening"]
    assert body.split("\n\n")[1].startswith("## ")  # still one paragraph


def test_an_opening_written_as_a_lead_line_and_paragraphs_is_one_paragraph(tmp_path):
    lead = "Our nightly builds got faster."
    def split(request, user):
        if user.startswith("Write the opening"):
            return lead + "\n\n" + " ".join(POOL[0:3])
        return None
    ctx = make_ctx(tmp_path, writer(split))
    draft.draft.fn(ctx, add_topic(ctx))
    assert sum(r.messages[-1]["content"].startswith("Write the opening") for r in ctx.llm.requests) == 1
    with ctx.ledger.read() as s:
        body = s.exec(select(Article)).one().body
    assert body.startswith(lead + " " + POOL[0])


def test_the_length_floor_is_enforced(tmp_path):
    ctx = make_ctx(tmp_path, writer(lambda r, u: "" if "one more paragraph" in u else None),
                   PIPELINE_DRAFT__TARGET_WORDS="800")
    with pytest.raises(CapabilityError, match=r"length \(body\): \d+ words, fewer than the 700 required"):
        draft.draft.fn(ctx, add_topic(ctx))


def test_a_failing_section_is_written_again_alone_told_why(tmp_path):
    # Seen on the embedded model: section 3 repeated section 1; the whole draft was written again (7 calls,
    # 130 s). Now only section 3 is asked again, told why.
    asked = {"n": 0}

    def repeats_once(request, user):
        if user.startswith("Write section 3 of"):
            asked["n"] += 1
            if asked["n"] == 1:
                # section 1 again, one word changed in each sentence: a near-duplicate, not a word-for-word repeat
                return part_for(user.replace("Write section 3 of", "Write section 1 of")).replace(" the ", " our ")
        return None
    ctx = make_ctx(tmp_path, writer(repeats_once))
    result = draft.draft.fn(ctx, add_topic(ctx))
    assert result["checks"] == "passed"
    parts = [r.messages[-1]["content"] for r in section_requests(ctx)]
    assert len(parts) == 7  # opening, 4 sections, closing, and section 3 once more
    again = [u for u in parts if u.startswith("Write section 3 of")][1]
    # its sentences said section 1's again, so they were deleted, and the section left too thin is written again
    assert "rejected: section length: a section needs at least two paragraphs" in again
    assert sum(u.startswith("Write the opening") for u in parts) == 1
    assert sum("<topic>" in r.messages[-1]["content"] for r in ctx.llm.requests) == 1  # the outline is not redone
    with ctx.ledger.read() as s:
        checks_ = json.loads(s.get(Article, result["article_id"]).checks_json)
    assert {r["part"] for r in checks_["repairs"]} == {"section 3"} and any("why" in r for r in checks_["repairs"])


def stored_draft(tmp_path, overrides):
    """The draft row the scripted writer leads to (``overrides`` answering the calls it wants to)."""
    ctx = make_ctx(tmp_path, writer(overrides))
    result = draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        return s.get(Article, result["article_id"])


def test_a_sentence_said_twice_is_deleted_where_it_is_repeated(tmp_path):
    # Seen on the embedded model: "The implementation of these fixes was a significant step forward …" four times.
    again = "Every job now has a named owner who hears about it when it slows down."

    def repeats(request, user):
        if user.startswith("Write section 2 of") or user.startswith("Write the closing"):
            return part_for(user).replace(". ", f". {again} ", 1)
        return None
    row = stored_draft(tmp_path, repeats)
    assert row.body.count(again) == 1
    assert {"part": "closing", "dropped": again} in json.loads(row.checks_json)["repairs"]
    assert ("repeated sentence", "paragraph 6, line 15") in checks(GOOD.replace(
        "Measure where", "A third of the tests waited on a sleep nobody remembered adding. Measure where"))
    assert checks(GOOD.replace("We deleted them.", "We deleted them. We deleted them.")) == []  # too short to count


def test_a_sentence_that_points_back_at_a_deleted_repeat_goes_with_it(tmp_path):
    # bench, 2026-12-04, a stored article: a sentence deleted as a repeat left the next one opening "This was done
    # by …" with nothing before it for "This" to mean.
    again = "Every job now has a named owner who hears about it when it slows down."
    dangling = "This was done by adding one line to each job's configuration."

    def repeats(request, user):
        if user.startswith("Write section 2 of"):
            return part_for(user).replace(". ", f". {again} ", 1)
        if user.startswith("Write the closing"):
            return part_for(user).replace(". ", f". {again} {dangling} ", 1)
        return None
    row = stored_draft(tmp_path, repeats)
    assert row.body.count(again) == 1 and dangling not in row.body
    assert {"part": "closing", "dropped": dangling} in json.loads(row.checks_json)["repairs"]
    assert part_for("Write the closing").split(". ", 1)[1] in row.body  # the sentences after it stay
    assert art.points_back("This was done by hand.", "en") and art.points_back("这样一来，构建快了很多。", "zh")
    assert not art.points_back("Thistle grows here.", "en") and not art.points_back("The job ran.", "en")


def test_a_sentence_that_says_a_long_run_of_an_earlier_one_again_is_deleted_and_named_by_the_check(tmp_path):
    # bench, 2026-12-04, a stored English article: "… as developers may spend a significant amount of time debugging,
    # which can lead to decreased focus and reduced efficiency" in three sections, each time in a new sentence.
    run = "developers may spend a significant amount of time debugging, which can lead to decreased focus"
    first, again = f"Flaky tests hurt because {run}.", f"Worse still, {run} and slower reviews."

    def repeats(request, user):
        if user.startswith("Write section 1 of"):
            return part_for(user).replace(". ", f". {first} ", 1)
        if user.startswith("Write section 3 of"):
            return part_for(user).replace(". ", f". {again} ", 1)
        return None
    row = stored_draft(tmp_path, repeats)
    assert first in row.body and again not in row.body
    assert {"part": "section 3", "dropped": again[:120]} in json.loads(row.checks_json)["repairs"]
    assert ("repeated sentence", "paragraph 6, line 15") in checks(GOOD.replace(
        "Measure where", f"Slow builds cost us because {run}. Measure where").replace(
        "Each job started cold.", f"Each job started cold, and {run}."))
    # a shorter run said twice is the writer's, not a repeat (9 words here)
    nine = "a significant amount of time debugging which can lead"
    assert not [c for c, _ in checks(GOOD.replace("Each job started cold.", f"Each job started cold: {nine} nowhere.")
                                     .replace("Measure where", f"Then {nine} somewhere. Measure where")) if c == "repeated sentence"]
    zh = "开发者可能会花大量时间调试这些不稳定的测试用例"  # 23 characters
    assert art.SaidBefore("zh").repeated(f"更糟的是，{zh}，评审也慢了。") is None
    said = art.SaidBefore("zh")
    said.add(f"不稳定的测试很伤人，因为{zh}。", 2)
    assert said.repeated(f"更糟的是，{zh}，评审也慢了。") == 2


def test_a_sentence_that_says_a_long_run_of_itself_twice_is_deleted_and_named_by_the_check(tmp_path):
    # bench, 2026-12-05, a held English article: "Regularly reviewing and updating the build process also involves
    # regularly reviewing and updating the build process." A tautology says nothing; no check caught it.
    tautology = ("Regularly reviewing and updating the build process also involves regularly reviewing and updating "
                 "the build process.")

    def saying_it_twice(request, user):
        if user.startswith("Write section 2 of"):
            return part_for(user).replace(". ", f". {tautology} ", 1)
        return None
    row = stored_draft(tmp_path, saying_it_twice)
    assert tautology not in row.body
    assert {"part": "section 2", "dropped": tautology[:120]} in json.loads(row.checks_json)["repairs"]
    found = checks(GOOD.replace("Each job started cold.", f"Each job started cold. {tautology}"))
    assert [c for c, _ in found] == ["repeated sentence"]
    assert "says 'regularly reviewing and updating the build process' twice" in art.check(
        TOPIC, GOOD.replace("Each job started cold.", tautology), topic=TOPIC, language="en", min_length=0)[0].message
    # Six words of itself again is a writer's (the human scoring corpus has such sentences), and so is Chinese
    # under twelve characters.
    assert art.said_twice_within("We cached the build output, and then we cached the build output logs too.", "en") is None
    assert art.said_twice_within("The tests ran on every commit, and the tests ran on every merge.", "en") is None
    assert art.said_twice_within("在单体应用中，单个应用的会话需要持久化，在单体应用中，单个应用的会话需要迁移。", "zh") == "在单体应用中单个应用的会"
    assert art.said_twice_within("缓存让构建更快，缓存也让测试更快。", "zh") is None
    assert art.said_twice_within("例如：**Visual Studio**: 在Visual Studio中打开调用栈视图。", "zh") is None


def test_a_chinese_term_in_latin_letters_is_one_unit_not_a_run_of_letters(tmp_path):
    # bench, 2026-12-06: counted a letter a unit, "夜间构建（Nightly Build）" alone was a 16-unit run, so a rewrite that named
    # it in its first sentence "said again what paragraph 1 said", and was rejected.
    said = art.SaidBefore("zh")
    said.add("夜间构建（Nightly Build）之所以变快，主要是因为优化了缓存。", 1)
    assert said.repeated("夜间构建（Nightly Build）之所以能更快，是因为并行构建可以同时处理多份任务。") is None
    assert said.repeated("夜间构建（Nightly Build）之所以变快，主要是因为优化了缓存和并行。") == 1  # a repeat still is
    assert art.units("用了 Gradle 8.5 的缓存", "zh") == ["用", "了", "gradle", "8", "5", "的", "缓", "存"]


# Section 2's first paragraph in other words: no sentence is near enough another to count as said again, the
# paragraph as a whole is (seen on the embedded model: "We identified and removed unnecessary dependencies …"
# as paragraphs 8, 10 and 12, and written again by both repair rounds).
REWORDED = ("That stung a little. Docker layers got rebuilt from nothing because a timestamp file stood near the top "
            "of our Dockerfile. Moving it one line lower kept twelve layers warm.")


def test_a_paragraph_that_repeats_an_earlier_one_in_other_words_is_deleted(tmp_path):
    def repeats(request, user):
        if user.startswith("Write section 4 of"):  # every time: asking again would get it again
            return f"{part_for(user)}\n\n{REWORDED}"
        return None
    ctx = make_ctx(tmp_path, writer(repeats))
    result = draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        row = s.get(Article, result["article_id"])
    assert REWORDED not in row.body and result["checks"] == "passed"
    assert {"part": "section 4", "dropped": REWORDED[:120]} in json.loads(row.checks_json)["repairs"]
    assert sum(r.messages[-1]["content"].startswith("Write section 4 of") for r in section_requests(ctx)) == 1


def test_what_a_repair_round_adds_to_reach_the_floor_is_cleared_of_repeats(tmp_path):
    """A repair that leaves the article short lengthens it; the paragraphs that adds are tidied like the first draft's."""
    said = POOL[2]  # a sentence of the opening

    def respond(request, user):
        if "one more paragraph" in user:
            return f"{said} The second runner now idles instead of rebuilding what the first one cached."
        return None
    ctx = make_ctx(tmp_path, writer(respond), PIPELINE_DRAFT__TARGET_WORDS="480")  # floor 420: the parts give ~380
    with ctx.ledger.read() as s:
        topic = s.get(Topic, add_topic(ctx))
    w = draft.Writer(ctx, draft._outline(ctx, topic))
    for name in w.part_names():
        w.write_part(name)
    assert art.body_length(w.body(), "en") < 420
    w.repair([])  # a round whose only problem is the length: no part owns it
    assert said in w.opening and w.body().count(said) == 1
    assert not [c for c in checks(w.body(), min_length=0) if c[0] == "repeated sentence"]


def test_a_fragment_is_traced_to_its_part_and_only_that_part_is_rewritten(tmp_path):
    seen = {"n": 0}

    def fragment_twice(request, user):
        if user.startswith("Write section 2 of"):
            seen["n"] += 1
            if seen["n"] <= 2:  # both of the part's attempts end mid-sentence: the article's check finds it
                return part_for(user) + " Measure first and the boring fixes"
        return None
    ctx = make_ctx(tmp_path, writer(fragment_twice))
    draft.draft.fn(ctx, add_topic(ctx))
    parts = [r.messages[-1]["content"] for r in section_requests(ctx)]
    again = [u for u in parts if u.startswith("Write section 2 of")]
    assert len(again) == 3 and "fragment" in again[2]
    assert all(sum(u.startswith(f"Write section {k} of") for u in parts) == 1 for k in (1, 3, 4))
    assert sum(u.startswith("Write the closing") for u in parts) == 1


def test_a_chinese_part_is_told_an_article_checks_problem_in_chinese():
    # bench, 2026-12-04: "fragment: the paragraph ends mid-sentence: '…”'" went to a Chinese section in English, and it
    # was written again with the same flaw twice
    fragment = art.Problem("fragment", "paragraph 4", "the paragraph ends mid-sentence: '…读调用栈”'", 9)
    assert draft.told(fragment, "zh") == "最后一句没有写完：'…读调用栈”'"
    assert draft.told(art.Problem("section length", "section 'x'", "a section needs at least two paragraphs", 3), "zh") \
        == "至少要写 2 段，段与段之间空一行"
    assert draft.told(fragment, "en") == "fragment: the paragraph ends mid-sentence: '…读调用栈”'"


def section_two_as(edit):
    """An override for ``writer``: section 2 as ``edit(its first paragraph, the rest)`` of its scripted text."""
    def override(request, user):
        if user.startswith("Write section 2 of"):
            return edit(*part_for(user).split("\n\n", 1))
        return None
    return override


def test_a_middle_paragraph_that_ends_mid_sentence_ends_at_its_last_sentence_not_rewritten(tmp_path):
    # bench, 2026-12-04: a Chinese section's middle paragraph ended in '…”'; the part's rules look at its end, the
    # article's check failed it, two repair rounds wrote the section again with the same, and the draft was lost.
    cut_inside = section_two_as(lambda first, rest: f"{first} Then we called it \"the boring\"\n\n{rest}")
    asks, body = drafted_asks(tmp_path, cut_inside, "Write section 2 of")
    assert len(asks) == 1  # not written again
    assert "Then we called it" not in body and part_for(asks[0]).split("\n\n")[0] in body


def test_a_second_with_no_first_before_it_is_dropped(tmp_path):
    # bench, 2026-12-04: a published section opened a paragraph with "Second, it helps to ensure …" under one
    # that listed nothing; each part is written on its own.
    second = section_two_as(lambda first, rest: f"{first}\n\nSecond, {rest[0].lower()}{rest[1:]}")
    _, body = drafted_asks(tmp_path, second, "Write section 2 of")
    assert "Second," not in body
    assert draft.drop_orphan_ordinals("First, name them. Second, expire them.", "en") == \
        "First, name them. Second, expire them."
    assert draft.drop_orphan_ordinals("要给开关命名。其次，要设定过期时间。", "zh") == "要给开关命名。要设定过期时间。"
    assert draft.drop_orphan_ordinals("首先，命名。其次，过期。", "zh") == "首先，命名。其次，过期。"


def test_a_stray_heading_line_at_the_end_of_a_part_is_dropped_not_a_fragment():
    # Seen twice on the embedded model: a section ending in the next section's heading as a bare line.
    text = POOL[3] + "\n\n" + POOL[4] + "\n\n**Sleeps and flaky tests**"
    assert draft.drop_heading_lines(text, ["Sleeps and flaky tests"]) == POOL[3] + "\n\n" + POOL[4]
    assert draft.drop_heading_lines("第2节：缓存键\n\n" + ZH_PARAGRAPH, ["缓存键"]) == ZH_PARAGRAPH
    assert draft.drop_heading_lines("Sleeps and flaky tests cost us minutes.", ["Sleeps and flaky tests"]) == \
        "Sleeps and flaky tests cost us minutes."  # a sentence that starts with the heading's words stays


def test_outline_headings_used_as_labels_inside_a_part_are_dropped(tmp_path):
    # Seen on the embedded model (make run, 2026-12-03): one section wrote the other sections as labelled runs of prose.
    def labelled(request, user):
        if user.startswith("Write section 2 of"):
            first, second = part_for(user).split("\n\n")
            return f"Sleeps and flaky tests: {first}\n\n**Uploads and layers**: {second}"
        return None
    ctx = make_ctx(tmp_path, writer(labelled))
    result = draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert "Sleeps and flaky tests:" not in body and "Uploads and layers**:" not in body
    assert part_for("Write section 2 of 4").split("\n\n")[1] in body  # the sentences after the labels stay
    assert draft.drop_heading_labels("We kept the cache key: it was fine.", ["The cache key"]) == \
        "We kept the cache key: it was fine."  # words of a heading inside a sentence are prose


ZH_PARAGRAPH = "修好这个键只花了一个下午，第二天的构建就快了十几分钟。"


# --- the checker, rule by rule ---------------------------------------------------------------

GOOD = """We cut the nightly build from forty minutes to nine, and most of the nightly work was boring: a cache key, some sleeps, an upload.

## The cache key

The cache was keyed on a lockfile we regenerated on every run. Each job started cold.

Fixing the key took one afternoon, and the first warm build finished in twelve minutes.

## Sleeps

A third of the tests waited on a sleep nobody remembered adding. We deleted them.

The flaky failures went with them, which surprised everyone except the person who added them.

Measure where the minutes go, then remove what nobody needs; the build stays fast and green."""


def checks(body, title=TOPIC, language="en", min_length=10):
    return [(p.check, p.where) for p in art.check(title, body, topic=TOPIC, language=language, min_length=min_length)]


def test_a_complete_article_passes():
    assert checks(GOOD) == []


@pytest.mark.parametrize("body, expected", [
    (GOOD + "\n\n## 3.", ("heading", "line 17")),
    (GOOD + "\n\n## 3.", ("dangling heading", "line 17")),
    (GOOD.replace("\n\nFixing the key took one afternoon, and the first warm build finished in twelve minutes.", ""),
     ("section length", "section 'The cache key' (line 3)")),
    (GOOD.rsplit("\n\n", 2)[0], ("section length", "section 'Sleeps' (line 9)")),
    (GOOD + "\n\n## Next", ("closing", "line 17")),
    (GOOD[:-1] + " and the", ("fragment", "paragraph 6 of section 'Sleeps', line 15")),
    ("## Intro\n\n" + GOOD, ("opening", "line 1")),
    (GOOD + "\n\n```sh\nmake build", ("open code fence", "line 17")),
    (GOOD + "\n\n- first:\n- second,", ("open list", "line 17")),
    (GOOD.replace("We deleted them.", "As an AI language model, I deleted them."), ("meta-text", "line 11")),
    (GOOD.replace("Each job started cold.", "In this article, we will explore why it started cold."), ("meta-text", "line 5")),
    (GOOD + "\n\nRegards, [Your Name].", ("meta-text", "line 17")),
    (GOOD.replace("We deleted them.", "The article explores why we deleted them."), ("meta-text", "line 11")),
    (GOOD.replace("Each job started cold.", "This post also highlights the cold start."), ("meta-text", "line 5")),
    (GOOD.replace("Each job started cold.", "Lorem ipsum dolor sit amet."), ("meta-text", "line 5")),
    (GOOD + "\n\n" + GOOD.rsplit("\n\n", 1)[1].replace("green", "green too"), ("near-duplicate", "paragraphs 6 and 7")),
])
def test_each_check_names_the_rule_and_where(body, expected):
    assert expected in checks(body)


def test_an_off_topic_title_and_the_length_floor():
    assert ("title", "first line") in checks(GOOD, title="The Boring Fixes Strategy")
    assert ("length", "body") in checks(GOOD, min_length=700)


ZH = """我们把夜间构建从四十分钟缩短到九分钟，靠的大多是不起眼的修补，而不是什么新工具。

## 缓存键

缓存的键用的是每次都会重新生成的锁文件，所以每个任务都从冷启动开始，重新下载一大堆依赖。

修好这个键只花了一个下午，第二天的构建就快了十几分钟。

## 休眠

三分之一的测试在等一个谁也记不得是谁加的两秒休眠。我们把它删了。

不稳定的失败也跟着消失了，只有当初加休眠的那位同事不觉得意外。

先量一量时间花在哪里，再删掉没人需要的东西，构建自然又快又稳定。"""


def test_chinese_is_counted_in_characters_and_checked_in_chinese():
    assert art.check("夜间构建为什么变快了", ZH, topic="夜间构建为什么变快了", language="zh", min_length=100) == []
    assert art.body_length(ZH, "zh") > 150 and art.unit("zh") == "characters"
    bad = "好的，以下是一篇关于夜间构建的文章，我们会讲清楚为什么它变快了很多。\n\n" + ZH.split("\n\n", 1)[1]
    found = art.check("夜间构建为什么变快了", bad, topic="夜间构建为什么变快了", language="zh", min_length=100)
    assert ("meta-text", "line 1") in [(p.check, p.where) for p in found]
    about_itself = ZH.replace("我们把它删了。", "本文将探讨我们为什么把它删了。")
    found = art.check("夜间构建为什么变快了", about_itself, topic="夜间构建为什么变快了", language="zh", min_length=100)
    assert ("meta-text", "line 11") in [(p.check, p.where) for p in found]
    cut = ZH[:-1] + "，然后"
    found = art.check("夜间构建为什么变快了", cut, topic="夜间构建为什么变快了", language="zh", min_length=100)
    assert "last sentence" in [p.check for p in found]
    assert ("length", "body") in [(p.check, p.where) for p in art.check(
        "夜间构建为什么变快了", ZH, topic="夜间构建为什么变快了", language="zh", min_length=1400)]


def test_a_short_opening_is_told_its_length_not_called_something_else():
    # Seen on the embedded model in Chinese: "…(≥ 40 characters), not a paragraph" about a paragraph, three times.
    short = "构建变快了。\n\n" + ZH.split("\n\n", 1)[1]
    [opening] = [p for p in art.check("夜间构建为什么变快了", short, topic="夜间构建为什么变快了", language="zh",
                                      min_length=100) if p.check == "opening"]
    assert opening.message.endswith("(≥ 40 characters), this one has 6"), opening.message
    heading_first = "## 开头\n\n" + ZH
    [opening] = [p for p in art.check("夜间构建为什么变快了", heading_first, topic="夜间构建为什么变快了",
                                      language="zh", min_length=100) if p.check == "opening"]
    assert opening.message.endswith("not a heading"), opening.message


# --- rewrites where the score says -----------------------------------------------------------

class FakeScorer:
    """Paragraph score = 40 + 10 per sentence beginning 'Here is the thing'; weaker for 'Nobody planned it.'."""

    def score_paragraph(self, text, language, index=0):
        value = 30.0 if "Nobody planned it." in text else 45.0 if "Fixing the key" in text else 55.0
        if text.startswith(("Here is the thing", "说白了")):
            value += 20
        if "scores lower" in text:
            value -= 20
        return scoring.ParagraphScore(index, value, False, len(text.split()))

    def score(self, text, language=None):
        ps = tuple(self.score_paragraph(p, language or "en", i) for i, p in enumerate(scoring.paragraphs_of(text)))
        total = sum(p.score for p in ps) / len(ps)
        return scoring.Score(round(total, 1), "scored", language or "en", {"fake": 1.0}, ps, "fake/1")


def drafted(tmp_path, rewriter, **env):
    """A stored draft (scripted), then a model whose rewrites ``rewriter(paragraph, user)`` answers."""
    state = {"drafting": True}

    def respond(request: Request):
        user = request.messages[-1]["content"]
        if taking_notes(request.system):
            return notes_of(user)
        if "editor" in request.system:
            return rewriter(rewritten_text(user), user)
        return writer()(request)
    ctx = make_ctx(tmp_path, respond, **env)
    article_id = draft.draft.fn(ctx, add_topic(ctx))["article_id"]
    state["drafting"] = False
    return ctx, article_id


def rewrites(ctx):
    return [r for r in ctx.llm.requests if "editor" in r.system or "编辑" in r.system]


def first_then_fair(first):
    """A rewriter answering its first ask with ``first(paragraph)`` and every later one fairly, and the asks it got."""
    asked: list[str] = []

    def rewriter(p, u):
        asked.append(u)
        return first(p) if len(asked) == 1 else rewrite_of(p)
    return rewriter, asked


def humanized_one(tmp_path, rewriter):
    """The draft's weakest paragraph humanized (pass mark 40): the context and that paragraph's record."""
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, rewriter, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        [record] = humanize.humanize.fn(ctx, article_id)["paragraphs"]
    return ctx, record


def test_the_weakest_paragraphs_are_rewritten_one_per_call_and_scores_stored(tmp_path):
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, lambda p, u: rewrite_of(p), PIPELINE_HUMANIZE__THRESHOLD="50",
                                  PIPELINE_HUMANIZE__PARAGRAPHS="2")
        result = humanize.humanize.fn(ctx, article_id)
    asked = rewrites(ctx)
    assert len(asked) == 2
    # The weakest first: the opening (30), then the paragraph about the cache key (45).
    assert "Nobody planned it." in asked[0].messages[-1]["content"] and "Fixing the key" in asked[1].messages[-1]["content"]
    assert "Section: The cache key" in asked[1].messages[-1]["content"]
    opening = " ".join(POOL[0:3])
    assert f"Paragraph ({art.prose_length(opening, 'en')} words;" in asked[0].messages[-1]["content"]  # its length, named
    assert [(p["before"], p["after"], p["kept"]) for p in result["paragraphs"]] == [(30.0, 50.0, True), (45.0, 65.0, True)]
    assert result["passed"] and result["score"] > result["score_before"]
    with ctx.ledger.read() as s:
        d, h = s.get(Article, article_id), s.get(Article, result["article_id"])
    stored = json.loads(h.paragraphs_json)
    assert stored["before"] == result["score_before"] and stored["after"] == h.score
    # Structure kept: same headings in the same places, the other paragraphs untouched.
    # the same headings, and the published one cites its source: a marker after paragraphs, the Sources list last
    assert [*re.findall(r"^## .*$", d.body, re.M), "## Sources"] == re.findall(r"^## .*$", h.body, re.M)
    assert " [1]\n" in h.body and h.body.endswith("1. The nightly build: what the platform team wrote down "
                                                    "(the author's notes, notes.md)")
    assert POOL[10] in h.body and len(art.blocks(d.body)) == len(art.blocks(art.without_sources(h.body)))


def test_a_copied_rewrite_is_written_next_from_notes_with_the_paragraph_out_of_sight(tmp_path):
    # Asked again with the paragraph before them, the embedded model's Chinese rewrites came back 96-100 % the
    # same, retry after retry (bench, 2026-12-03); told "100% the same", they wrote the retry line into the
    # paragraph. A copy is not told it copied: notes are taken on the paragraph, and it is written from them.
    copying, asked = first_then_fair(lambda p: p)
    ctx, record = humanized_one(tmp_path, copying)
    first, second = record["attempts"]
    assert first["rejected"].startswith("it is 100% the original's text") and "from" not in first
    assert second["from"] == "notes" and second["score"] == 50.0 and record["kept"]
    opening = " ".join(POOL[0:3])
    [noted] = [r for r in ctx.llm.requests if taking_notes(r.system)]
    assert noted.messages[-1]["content"] == opening and record["notes"] == notes_of(opening)
    # A worked example goes first, as a turn of its own (told only "notes, not sentences", the embedded model's
    # Chinese notes were the paragraph's sentences); it is not in the system prompt.
    example, shown = noted.messages[1:3]
    assert (example["role"], shown["role"]) == ("user", "assistant") and shown["content"].startswith("- ")
    assert "===" not in noted.system and "example" not in noted.system
    assert "Paragraph from these notes" in asked[1] and opening not in asked[1] and "previous rewrite" not in asked[1]
    assert f"- {POOL[1]}" in asked[1] and "keep exactly: 40, 9" in asked[1]
    assert rewrites(ctx)[1].temperature > rewrites(ctx)[0].temperature


def test_a_rewrite_no_better_in_the_paragraphs_own_words_is_written_next_from_notes(tmp_path):
    # A Chinese rewrite 0.93 the same scored no better; asked again as at first, hotter, it came back 100 % the
    # same, and the paragraph's last attempt was gone (bench, 2026-12-04). The next is written from notes.
    near = ("We cut the nightly build from 40 minutes to 9, and most of it was dull work. Nobody planned it. The cache "
            "was keyed on a lockfile we rebuilt on every run, so each job began cold and fetched half the internet once more.")
    nearly, asked = first_then_fair(lambda p: near)
    _, record = humanized_one(tmp_path, nearly)
    first, second = record["attempts"]
    assert humanize.NEAR_COPY <= first["similarity"] < humanize.UNCHANGED and first["score"] == record["before"]
    assert second["from"] == "notes" and second["score"] > record["before"] and record["kept"]
    assert "Paragraph from these notes" in asked[1] and " ".join(POOL[0:3]) not in asked[1]


def test_a_rewrite_no_better_in_its_own_words_is_asked_again_with_the_paragraph(tmp_path):
    other = ("Most of the work was boring, and no one saw it coming. Nobody planned it. We went from 40 minutes to 9 "
             "once the cache stopped keying on a lockfile rebuilt on every run, which made each job start cold and "
             "download half the internet.")
    different, asked = first_then_fair(lambda p: other)
    ctx, record = humanized_one(tmp_path, different)
    first = record["attempts"][0]
    assert first["similarity"] < humanize.NEAR_COPY and first["score"] == record["before"]
    assert len(asked) == 2 and " ".join(POOL[0:3]) in asked[1]
    assert not [r for r in ctx.llm.requests if taking_notes(r.system)]


def test_a_rewrite_that_opens_with_the_articles_title_is_cut_to_what_follows(tmp_path):
    # Given the title in the request's header, the embedded model began Chinese rewrites with it: one was kept that
    # way, two rejected as a repeated sentence (bench, 2026-12-04).
    def titled(p, u):
        title = re.search(r"^Article: (.+)$", u, re.M).group(1)
        return f"{title}? {rewrite_of(p)}"
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, titled, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    assert record["kept"] and record["text"].startswith("Here is the thing.")
    with ctx.ledger.read() as s:
        h = s.get(Article, result["article_id"])
    assert not any(b.text.startswith(h.title) for b in art.blocks(h.body))
    run_on = "一个不稳定的测试让团队付出多少代价随着项目变大，测试越来越慢。"
    assert humanize.without_title(run_on, "一个不稳定的测试让团队付出多少代价") == "随着项目变大，测试越来越慢。"
    assert humanize.without_title("Reading a trace from the bottom is a skill.", "Reading a trace from the bottom") \
        == "Reading a trace from the bottom is a skill."
    assert humanize.without_title("Caching made builds faster.", "Caching") == "Caching made builds faster."


def test_a_rewrite_that_writes_the_retry_line_back_is_cut_to_its_rewrite(tmp_path):
    def echoing(p, u):
        if "Your previous rewrite" not in u:
            return " ".join(p.split()[: len(p.split()) // 2]) + "."  # too short: told so
        retry = u.split("\n\n")[-1]
        return f"{rewrite_of(p)} {retry}"
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, echoing, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    assert "keep its length" in record["attempts"][0]["rejected"] and record["kept"]
    with ctx.ledger.read() as s:
        assert "previous rewrite" not in s.get(Article, result["article_id"]).body


def test_a_rewrite_that_names_what_its_paragraph_does_not_say_is_rejected(tmp_path):
    # Written from notes, the embedded model's rewrites named what no note said ("an application written in Python";
    # bench, 2026-12-04). The article's title and the section's name may be named.
    def inventing(p, u):
        return rewrite_of(p).replace("Here is the thing.", "Here is the thing, at Acme in 2019.")
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, inventing, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    assert all("'2019', 'Acme'" in a["rejected"] and "invent no number or name" in a["rejected"] for a in record["attempts"])
    assert not record["kept"]
    # A name the article uses in another paragraph is not invented (the draft's section 3 names the Dockerfile)
    def borrowing(p, u):
        return rewrite_of(p).replace("Here is the thing.", "Here is the thing, Dockerfile aside.")
    _, record = humanized_one(tmp_path / "borrowing", borrowing)
    assert record["kept"] and not any("invent" in a.get("rejected", "") for a in record["attempts"])
    named = "Then the cache in Gradle cut it to 9 minutes."
    assert not humanize.rewrite_problems("Then the cache cut it to 9 minutes.", named, "en", "Faster Gradle builds\nCaching")
    assert humanize.rewrite_problems("Then the cache cut it to 9 minutes.", named, "en", "Faster builds\nCaching")
    assert humanize.rewrite_problems("我们把构建缩短到 9 分钟。", "用 Gradle 之后，我们把构建缩短到了 9 分钟。", "zh")[0].startswith(
        "加了原段没有的 'Gradle'")


def test_a_capitalised_common_word_or_a_spelled_out_acronym_is_not_an_invented_name():
    # bench, 2026-12-04: 11 English rewrites were rejected for "adding" 'Once', 'Error' or 'Integrated Development
    # Environment' (their paragraph said IDE): a word capitalised after a colon or a dash, or an acronym spelled out.
    original = "We ran the suite in the IDE. It failed once a week, and the error log said nothing useful."
    for rewrite in ("The suite ran in the Integrated Development Environment (IDE). It failed about once a week: "
                    "Once the log was read, it said nothing useful.",
                    "The suite ran in the IDE — Every week it failed once, and the log's Error lines said nothing useful."):
        assert not [w for w in humanize.rewrite_problems(original, rewrite, "en") if "invent" in w], rewrite
    assert art.added_names("It failed once a week: Once, the Error log was empty.", "It failed once a week; the error log was "
                           "empty.", "en") == []
    assert art.added_names("At Acme it failed once a week.", "It failed once a week.", "en") == ["Acme"]
    assert art.missing_facts("We moved to CircleCI in 2023.", "In 2023 we moved to Circle CI.", "en") == []
    labelled = "**Test Execution Issues**: Sometimes the `retry` flag hid them from Jenkins."
    assert art.missing_facts(labelled, "The `retry` flag hid test execution issues from Jenkins.", "en") == []
    assert art.missing_facts(labelled, "The retry flag hid them.", "en") == ["Jenkins", "`retry`"]
    assert art.added_names("In the Kubernetes Engine it failed.", "In the engine it failed.", "en") == ["Kubernetes"]


def test_a_rewrite_that_drops_a_number_is_rejected(tmp_path):
    def drop(p, u):
        return "Here is the thing. We cut the nightly build a lot, and most of it was dull work. Nobody planned it."
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, drop, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    assert all("dropped" in a["rejected"] and "'40'" in a["rejected"] for a in record["attempts"])
    assert not record["kept"] and record["after"] == record["before"]
    # A rewrite is sampled away from its prompt's wording, unless the attempt before dropped a fact: the fact is a
    # run of the prompt too (a long identifier is several tokens)
    rewrites = [r for r in ctx.llm.requests if "Paragraph (" in r.messages[-1]["content"]]
    assert len(rewrites) == 1 + ctx.settings.humanize.max_rewrites
    assert [r.fresh_wording for r in rewrites] == [True] + [False] * ctx.settings.humanize.max_rewrites
    assert not [r for r in ctx.llm.requests if r.fresh_wording and r not in rewrites]  # and nothing else is
    with ctx.ledger.read() as s:
        assert POOL[0] in s.get(Article, result["article_id"]).body  # the original stays


def test_a_rewrite_cut_after_running_on_past_its_paragraph_is_ended_at_the_paragraph(tmp_path):
    # bench, 2026-12-04: sampled away from the paragraph's wording, the embedded model wrote the paragraph, then
    # went on into more ("\n\n5. **Reproduce the Issue**: …") until its budget cut it; 4 of 8 English attempts in a
    # run were rejected as unfinished.
    def running_on(p, u):
        return Reply(text=f"{rewrite_of(p)}\n\n5. **Reproduce the issue**: run it again in a clean", finish_reason="length")
    ctx, record = humanized_one(tmp_path, running_on)
    assert record["kept"] and len(record["attempts"]) == 1
    with ctx.ledger.read() as s:
        body = s.exec(select(Article).where(Article.kind == "humanized")).one().body
    assert "Reproduce" not in body and not [c for c, _ in checks(body, min_length=0)]
    cut_early = humanize.ran_on("We cut the nightly build. Then the", 40, "en")
    assert cut_early == ""  # too little of it before the cut: rejected as before


def test_a_rewrite_much_longer_than_its_paragraph_keeps_only_its_first_sentences_up_to_the_limit(tmp_path):
    # make run, 2026-12-05: asked for 113 words, the embedded model rewrote 103-word paragraphs in 158 and 218, a
    # story the paragraph never told added after it ("Over the course of a few weeks, we observed …").
    story = " ".join(f"Over week {n} we watched the queue grow and grow again." for n in range(1, 30))
    ctx, record = humanized_one(tmp_path, lambda p, u: f"{rewrite_of(p)} {story}")
    assert record["kept"] and len(record["attempts"]) == 1
    with ctx.ledger.read() as s:
        d = s.exec(select(Article).where(Article.kind == "draft")).one()
        h = s.exec(select(Article).where(Article.kind == "humanized")).one()
    original = next(a for a, b in zip(art.blocks(d.body), art.blocks(h.body), strict=True) if a.text != b.text).text
    kept = next(b.text for b in art.blocks(h.body) if "Here is the thing." in b.text)
    assert rewrite_of(original) in kept  # the rewrite itself whole, the story cut at a sentence
    assert art.prose_length(kept, "en") <= humanize.LONGER * art.prose_length(original, "en")
    assert art.complete_sentence(kept) and "week 29" not in kept
    # And the call's budget leaves no room for twice the paragraph.
    [ask] = rewrites(ctx)
    assert ask.max_tokens <= 1.2 * draft.TOKENS_PER_UNIT["en"] * humanize.LONGER * art.prose_length(original, "en") + 30
    assert humanize.at_most("One. Two three four five six.", 2, "en") == "One."


def test_a_rewrite_given_as_paragraphs_or_as_a_line_a_sentence_is_kept_as_one_paragraph(tmp_path):
    # Measured on the embedded model: about one rewrite in four split in two (rejected for its shape before), and
    # one kept as six one-line sentences (bench, 2026-12-05).
    def lines(p, u):
        return "\n".join(re.split(r"(?<=[.!?])\s+", rewrite_of(p)))
    ctx, record = humanized_one(tmp_path, lines)
    assert record["kept"] and len(record["attempts"]) == 1
    with ctx.ledger.read() as s:
        body = s.exec(select(Article).where(Article.kind == "humanized")).one().body
    kept = next(b.text for b in art.blocks(body) if "Here is the thing." in b.text)
    assert "\n" not in kept and kept.startswith("Here is the thing. ")
    assert humanize.one_paragraph("First one.\n\nSecond one.", "en") == "First one. Second one."
    assert humanize.one_paragraph("第一句。\n第二句。", "zh") == "第一句。第二句。"
    assert humanize.one_paragraph("Intro:\n\n- a\n- b", "en") == "Intro:\n\n- a\n- b"  # a list stays (rejected)


def test_a_name_the_rewrite_misspelt_or_misspaced_is_written_as_its_paragraph_has_it_a_changed_number_is_not():
    # bench, 2026-12-06: sampled away from the prompt's wording, a rewrite wrote 'maven-sure-fire-plugin'; rejected
    # for dropping 'maven-surefire-plugin', its retry (sampled so that names come through) copied the paragraph.
    original = "We pinned `maven-surefire-plugin` to 3.2 and moved the nightly job from Jenkins to Buildkite."
    typos = "Our nightly job left Jenkin for Buildkit, and we pinned `maven-sure-fire-plugin` to 3.2."
    fixed = humanize.respelt(original, typos, "en")
    assert fixed == "Our nightly job left Jenkins for Buildkite, and we pinned `maven-surefire-plugin` to 3.2."
    assert not humanize.rewrite_problems(original, fixed, "en")
    changed = "Our nightly job left Jenkins for Buildkite, and we pinned `maven-surefire-plugin` to 3.5."
    assert humanize.respelt(original, changed, "en") == changed  # a number is a fact, not a spelling
    assert any("dropped '3.2'" in why for why in humanize.rewrite_problems(original, changed, "en"))
    zh = "我们用了 Maven 的 `maven-surefire-plugin` 插件。"
    assert humanize.respelt(zh, "我们配置了 Maven 的 `maven-sure-fire-plugin` 插件。", "zh") == \
        "我们配置了 Maven 的 `maven-surefire-plugin` 插件。"
    # bench_rewrites, 2026-12-07: '`Ctrl + Shift + F 10`' for '`Ctrl + Shift + F10`', rejected as dropped and added.
    keys = "在 Windows 上按 `Ctrl + Shift + F10` 运行，在 macOS 上按 `Cmd + Shift + F10`。"
    spaced = "Windows 下用 `Ctrl + Shift + F 10` 运行，macOS 下用 `Cmd + Shift + F 10`。"
    assert humanize.respelt(keys, spaced, "zh") == "Windows 下用 `Ctrl + Shift + F10` 运行，macOS 下用 `Cmd + Shift + F10`。"
    assert humanize.respelt(keys, spaced.replace("F 10", "F 11"), "zh") == spaced.replace("F 10", "F 11")


def test_the_english_of_a_chinese_term_a_rewrite_left_out_is_put_back_a_term_it_dropped_stays_dropped():
    # bench, 2026-12-06: 9 of 23 rejected Chinese tries wrote '夜间构建' for '夜间构建（Nightly Build）' and were
    # rejected for dropping 'Nightly' and 'Build', a model call each, though the term was there.
    original = "我们的夜间构建（Nightly Build）变快了，主要靠缓存（Caching）和后进先出（LIFO）的队列。"
    rewrite = "夜间构建快了不少，功劳在缓存，还有那个后进先出的队列。"
    fixed = humanize.reglossed(original, rewrite)
    assert fixed == "夜间构建（Nightly Build）快了不少，功劳在缓存（Caching），还有那个后进先出（LIFO）的队列。"
    assert not art.missing_facts(original, fixed, "zh")
    kept = "夜间构建（Nightly Build）快了，靠的是 caching 和 LIFO 队列。"
    assert humanize.reglossed(original, kept) == kept  # the English is there already, in any case
    # bench, 2026-12-07: a bracket of the rewrite's own after the term was followed by the paragraph's.
    assert humanize.reglossed("一个不稳定的测试（flaky test）让团队慢了下来。", "一个不稳定的测试（flaky测试）拖慢了团队。") == \
        "一个不稳定的测试（flaky test）拖慢了团队。"
    lost = "夜间构建快了，靠的是队列。"  # 缓存 and 后进先出 are gone: a drop, not a gloss left out
    assert set(art.missing_facts(original, humanize.reglossed(original, lost), "zh")) == {"Caching", "LIFO"}


def test_a_rewrite_of_a_paragraph_that_introduces_code_may_end_in_its_colon_as_the_paragraph_does():
    # bench_rewrites, 2026-12-06: '例如，在 gdb 中，可以使用以下命令来读取调用栈：' (a code block after it) was rewritten
    # ending in its colon, and rejected as unfinished (3 of 57 Chinese tries).
    original = "在断点处，用调试器的命令读取调用栈。例如，在 gdb 中，可以使用以下命令来读取调用栈："
    rewrite = "停在断点上时，调用栈要靠调试器的命令来读。拿 gdb 来说，读调用栈用的是下面这条命令："
    assert not humanize.rewrite_problems(original, rewrite, "zh")
    assert humanize.rewrite_problems("我们用 gdb 读调用栈。", "拿 gdb 来说，读调用栈用的是下面这条命令：", "zh")


def test_two_words_a_rewrite_ran_together_are_written_apart_a_word_of_its_own_is_not(tmp_path):
    # bench, 2026-12-06: sampled away from its prompt's runs, the embedded model wrote 'individuals orteams
    # responsible' and 'test automationframework' (the token without its space); both articles kept them.
    original = "Assign individuals or teams to each flag, and add a retry to the test automation framework."
    joined = "Each flag gets individuals orteams, and the test automationframework gets a retry; nobody cannot."
    assert humanize.unjoined(original, joined) == \
        "Each flag gets individuals or teams, and the test automation framework gets a retry; nobody cannot."
    assert humanize.unjoined("我们在 Jenkins 中用了 test runner。", "我们的 testrunner 在 Jenkins 里。") == \
        "我们的 test runner 在 Jenkins 里。"
    assert humanize.unjoined("A cannot B.", "Any orteams here.") == "Any orteams here."  # not two of the paragraph's

    def running_together(p):
        return rewrite_of(p).replace("keyed on a lockfile", "keyedon a lockfile")
    _, record = humanized_one(tmp_path, first_then_fair(running_together)[0])
    assert record["kept"] and "keyed on a lockfile" in record["text"] and "keyedon" not in record["text"]


def test_a_heading_line_a_rewrite_set_over_its_paragraph_is_dropped_a_list_is_not(tmp_path):
    # bench, 2026-12-06: 'Exploring the Stack Trace from the Bottom Up: A Practical Technique for Debugging' over a
    # rewrite, joined into its first sentence, was rejected for adding 'Navigating', 'Technique'.
    heading = "Warming The Cold Cache Again: A Practical Technique For Builds"

    def headed(p):
        return f"{heading}\n{rewrite_of(p)}"
    _, record = humanized_one(tmp_path, first_then_fair(headed)[0])
    first = record["attempts"][0]
    assert "rejected" not in first and record["kept"] and "Technique" not in record["text"]
    assert humanize.without_heading("**功能开关的有效性与过期机制**\n功能开关需要过期时间。") == "功能开关需要过期时间。"
    listed = "- the cache key\n- the sleeps"
    assert humanize.without_heading(listed) == listed
    prose = "We cut the build to nine minutes.\nNobody planned it."
    assert humanize.without_heading(prose) == prose


def test_a_preamble_line_over_a_rewrite_is_taken_off_and_anywhere_else_fails_the_check(tmp_path):
    # make run, 2026-12-06: "Here's a reformulated version of the given paragraph:" over a rewrite was joined into
    # it, its score rose, and it was kept: the held article's paragraph opened with it.
    preamble = "Here's a reformulated version of the given paragraph:"

    def introduced(p):
        return f"{preamble}\n\n{rewrite_of(p)}"
    _, record = humanized_one(tmp_path, first_then_fair(introduced)[0])
    assert "rejected" not in record["attempts"][0] and record["kept"] and "reformulated" not in record["text"]
    assert art.without_preamble("以下是改写后的段落：\n\n我们把缓存键改成了锁文件的哈希。") == "我们把缓存键改成了锁文件的哈希。"
    assert art.without_preamble("Sure! Here is the rewritten text: We cut the build.") == "We cut the build."
    kept = "Here is the config we used:\n\n```toml\nx = 1\n```"  # an article's own colon line stays
    assert art.without_preamble(kept) == kept
    assert any("preamble" in why for why in humanize.rewrite_problems(POOL[0], f"{POOL[0]} {preamble} {POOL[0]}", "en"))
    assert "meta-text" in [c for c, _ in checks(GOOD.replace("\n\n## ", f"\n\n{preamble} We cut it.\n\n## ", 1))]


def test_a_rewrite_that_answers_the_request_instead_of_rewriting_is_rejected(tmp_path):
    # Seen on the embedded model (make run, 2026-12-03): told its rewrite scored too low, it kept our line and answered
    # it inside the paragraph; the score rose, so it was kept, and the held article opened with it.
    echo = ("Your previous response scored 0.3, not above the original's 0.3. I will refine the paragraph to "
            "incorporate a more engaging, conversational tone. Please provide me with your revised text.")

    def answering(p, u):
        # (It opened the paragraph: at its end, past LONGER, it would be cut off with the rest of the run-on.)
        return f"{echo} {rewrite_of(p)}" if "rejected" not in u else rewrite_of(p)
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, answering, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    first, second = record["attempts"]
    assert "text about the rewrite request" in first["rejected"] and record["kept"] and "score" in second
    with ctx.ledger.read() as s:
        assert "previous response" not in s.get(Article, result["article_id"]).body
    assert "meta-text" in [c for c, _ in checks(f"{echo}\n\n{GOOD}")]  # and the article check names it too
    editor = f"As an editor with first-hand experience, I would rewrite the paragraph as follows: {POOL[0]}"
    assert any("rewrite request" in why for why in humanize.rewrite_problems(POOL[0], editor, "en"))  # seen the same day
    zh = "我们把缓存键改成了锁文件的哈希。你上一次的改写没有通过：得分 0.3，没有超过原文的 0.3。"
    assert any("rewrite request" in why for why in humanize.rewrite_problems("我们把缓存键改成了锁文件的哈希。", zh, "zh"))


def test_a_rewrite_that_says_a_sentence_twice_is_rejected_the_article_keeps_its_checks(tmp_path, monkeypatch):
    # bench, 2026-12-03: a kept rewrite (its score rose) said one of its sentences twice, and the held article
    # failed the "repeated sentence" check its draft had passed. The article with the rewrite in it is checked.
    def doubling(p, u):
        said = rewrite_of(p)
        return f"{said} {re.split(r'(?<=[.!?]) ', p)[-1]}" if "fails a check" not in u else said
    monkeypatch.setattr(humanize, "LONGER", 2.0)  # the sentence said again is not cut off as a run-on
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, doubling, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    first, second = record["attempts"]
    assert "score" in second
    assert "the article fails a check it passed: repeated sentence" in first["rejected"] and record["kept"]
    with ctx.ledger.read() as s:
        h = s.get(Article, result["article_id"])
    assert not art.check(h.title, h.body, topic=TOPIC, language="en", min_length=0)


def test_a_rewrite_that_writes_the_request_header_back_is_cut_to_its_rewrite_or_rejected():
    # bench, 2026-12-03: a Chinese rewrite began with its request ("…为什么变快了？小节：缓存（Caching）段落（93 字，
    # 改写后字数相近；原样保留：…）："), its score rose, and it was kept in the held article.
    seen = ("夜间构建（Nightly Build）为什么变快了？小节：缓存（Caching）段落（93 字，改写后字数相近；原样保留：缓存、Gradle）："
            "在我们团队的夜间构建中，缓存是关键。我们用的是 Gradle。")
    assert humanize.without_request(seen) == "在我们团队的夜间构建中，缓存是关键。我们用的是 Gradle。"
    en = "Article: Why builds got faster Section: Caching Paragraph (38 words; keep exactly: Gradle): We used Gradle."
    assert humanize.without_request(en) == "We used Gradle."
    # The request written from notes (humanize.FROM_NOTES), written back.
    assert humanize.without_request("文章：构建 小节：缓存 段落要点（写成约 90 字的一段；原样保留：Gradle）：我们用的是 Gradle。") == \
        "我们用的是 Gradle。"
    assert humanize.without_request("Paragraph from these notes (write about 40 words; keep exactly: Gradle): We used Gradle.") == \
        "We used Gradle."
    # bench, 2026-12-06: our retry line's opening, in other words, before the rewrite (3 of 23 rejected Chinese tries).
    retry = humanize.Template(humanize.RETRY["zh"]).substitute(why="只有 60 字，原段有 90 字：保持篇幅和内容")
    assert humanize.without_request("你上一次的改写太短了，这次补足。我们用的是 Gradle。", retry) == "我们用的是 Gradle。"
    assert humanize.without_request("Your previous rewrite was rejected: it dropped 'Node.js'. We used Node.js.",
                                    "Your previous rewrite was rejected: x.") == "We used Node.js."
    assert humanize.without_request("你上一次的改写太短了。", retry) == "你上一次的改写太短了。"  # nothing after it: rejected
    # … or after the rewrite, as a second rewrite's header (bench_rewrites, 2026-12-06): the rewrite is before it.
    assert humanize.without_request("测试不稳定，团队就慢。你上次的改写没有通过：漏掉了 'test'。", retry) == "测试不稳定，团队就慢。"
    assert humanize.without_request("开关要好好命名。改写后的段落（约 252 字）：开关的名字要清楚。") == "开关要好好命名。"
    assert any("rewrite request" in why for why in humanize.rewrite_problems(
        "我们用的是 Gradle 构建。", "我们用的是 Gradle，段落要点（写成约 90 字的一段）。", "zh"))
    left = "我们用的是 Gradle，改写后字数相近，原样保留：Gradle。"
    assert any("rewrite request" in why for why in humanize.rewrite_problems("我们用的是 Gradle 构建。", left, "zh"))
    assert "meta-text" in [c for c, _ in checks(f"We used Gradle. Paragraph (38 words; the rewrite keeps about as many).\n\n{GOOD}")]


def test_facts_are_numbers_names_links_and_identifiers():
    text = "In 2024 Alice moved `make_ci` to GitHub Actions (see https://example.com/ci): 1,200 jobs and cache_key.v2 changed."
    found = art.facts(text, "en")
    assert {"2024", "Alice", "`make_ci`", "GitHub", "Actions", "https://example.com/ci", "1200", "cache_key.v2"} <= found
    assert art.missing_facts(text, text.replace("1,200", "1200"), "en") == []
    assert art.missing_facts(text, text.replace("2024", "last year"), "en") == ["2024"]
    assert art.facts("我们在 2024 年把 Redis 升级到 7.2 版本。", "zh") >= {"2024", "Redis", "7.2"}
    # bench, 2026-12-04: "TestNG的报告格式支持我们跟踪测试结果" was one fact, and a rewrite that kept TestNG "dropped" it
    zh = art.facts("后来改用 TestNG的报告格式支持我们跟踪测试结果，featureAManager里的开关也留着。", "zh")
    assert {"TestNG", "featureAManager"} <= zh and not any(re.search(r"[\u4e00-\u9fff]", f) for f in zh)


def test_a_rewrite_is_kept_only_if_its_score_rises(tmp_path):
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, lambda p, u: rewrite_of(p).replace("Here is the thing. ", "") + " This one scores lower.",
                                  PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="1")
        result = humanize.humanize.fn(ctx, article_id)
    [record] = result["paragraphs"]
    assert not record["kept"] and all(a.get("score", 99) < record["before"] for a in record["attempts"])
    # Not better is asked again as at first, hotter: told its score, the embedded model wrote "Your previous
    # response scored …" into the paragraph (bench, 2026-12-03).
    asked = [r.messages[-1]["content"] for r in rewrites(ctx)]
    temperatures = [r.temperature for r in rewrites(ctx)]
    assert len(asked) == 1 + ctx.settings.humanize.max_rewrites and len(set(asked)) == 1 and "scored" not in asked[0]
    assert temperatures == sorted(temperatures) and temperatures[1] > temperatures[0]


def test_the_length_a_rewrite_is_asked_for_follows_what_the_model_writes(tmp_path):
    # bench, 2026-12-03: asked to keep about as many words, the embedded model wrote 0.3-0.8 of them (median 0.70),
    # and 11 rewrites were rejected as shorter than their paragraph.
    def short(p, u):
        words = rewrite_of(p).split()
        return " ".join(words[: round(len(words) * 0.7)]).rstrip(",;:") + "."
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, short, PIPELINE_HUMANIZE__THRESHOLD="40", PIPELINE_HUMANIZE__PARAGRAPHS="4")
        humanize.humanize.fn(ctx, article_id)
    shares = []
    for r in rewrites(ctx):
        n, asked = map(int, re.search(r"Paragraph \((\d+) words; write about (\d+)", r.messages[-1]["content"]).groups())
        shares.append(asked / n)
    assert shares[0] == pytest.approx(1 / 0.85, abs=0.03)  # the prior, before any rewrite is measured
    assert shares[-1] > shares[0] + 0.1 and max(shares) <= 1 / 0.6 + 0.03  # it learns the model writes short; bounded


def test_a_rewrite_request_names_the_facts_the_paragraph_must_keep(tmp_path):
    # bench, 2026-12-03: "it dropped 'Maven'" rejected both rewrites of one paragraph.
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, lambda p, u: rewrite_of(p), PIPELINE_HUMANIZE__THRESHOLD="40",
                                  PIPELINE_HUMANIZE__PARAGRAPHS="6")
        humanize.humanize.fn(ctx, article_id)
    asks = [r.messages[-1]["content"] for r in rewrites(ctx)]
    opening = next(a for a in asks if POOL[0] in a)
    assert re.search(r"Paragraph \(\d+ words; write about \d+; keep exactly: 40, 9\):", opening)
    for ask in asks:  # named exactly where the paragraph has facts
        head, paragraph = re.split(r"\n(?=[^\n]*$)|(?<=:)\n", ask.split("\n\n", 1)[1], maxsplit=1)
        assert ("keep exactly" in head) == bool(art.facts(paragraph, "en"))


def test_below_the_threshold_the_run_ends_incomplete_with_one_line_for_the_editor(tmp_path):
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, lambda p, u: rewrite_of(p), PIPELINE_HUMANIZE__THRESHOLD="90")
        with pytest.raises(AgentIncompleteError) as info:
            humanize.humanize.fn(ctx, article_id)
    line = str(info.value)
    assert info.value.exit_code == ExitCode.INCOMPLETE and "\n" not in line
    assert re.search(r"score [\d.]+ < threshold 90", line) and "weakest paragraph #" in line
    for command in ("review show", "review approve", "review reject"):
        assert f"pipeline {command} {ctx.run_id}" in line
    with ctx.ledger.read() as s:
        review = s.exec(select(Review).where(Review.run_id == ctx.run_id)).one()
        held = s.get(Article, review.article_id)
    assert held.kind == "humanized" and held.score < 90  # held, with its real score: the threshold is not lowered


def test_below_the_threshold_with_manual_review_awaits_an_editor(tmp_path):
    with scoring.using(FakeScorer()):
        ctx, article_id = drafted(tmp_path, lambda p, u: rewrite_of(p), PIPELINE_HUMANIZE__THRESHOLD="90",
                                  PIPELINE_PUBLISH__REVIEW="manual")
        with pytest.raises(AwaitingReview, match="weakest paragraph #"):
            humanize.humanize.fn(ctx, article_id)


# --- Chinese ---------------------------------------------------------------------------------

ZH_SENTENCES = [s + "。" for s in (
    "我们把夜间构建从四十分钟缩短到九分钟，靠的大多是不起眼的修补",
    "没人事先规划过",
    "缓存的键用的是每次都会重新生成的锁文件，所以每个任务都从冷启动开始",
    "修好这个键只花了一个下午",
    "三分之一的测试在等一个谁也记不得是谁加的两秒休眠",
    "删掉休眠以后，不稳定的失败也跟着消失了",
    "先量一量时间花在哪里",
    "链接器在没人看的调试符号上花了九十秒",
    "夜间任务关掉调试符号，省下的时间比买新机器还多",
    "这让人有点难堪",
    "镜像层每次都从头重建，因为一个时间戳文件放在了 Dockerfile 的最上面",
    "把它往下挪一行，十二个层就保持了缓存",
    "产物上传一个接一个地传到另一个区域的存储桶，足足花了十一分钟",
    "改成并行上传，一个上午就解决了",
    "文档构建也挪出了夜间任务，反正它有自己的时间表",
    "大家先注意到的是构建变绿了，后来才发现它变快了",
    "一个随机失败的快构建依然是慢构建，因为总得有人重跑再等一遍",
    "每项改动和效果都记在表格里，这让那些平淡的修补很容易说服别人",
    "有些想法毫无作用",
    "把测试拆到四台机器上，效果没有预想的好，因为每一份的准备时间占了大头",
    "我们又合并了两份，几乎没有损失",
    "最大的一次收益来自删除：一个测试早已下线服务的旧集成任务",
    "它每天晚上都跑，跑了整整一年",
    "没人负责它，所以也没人关掉它",
    "后来每个任务在配置里都写上了负责人的名字",
    "任务一变慢，第二天早上负责人就会收到消息",
    "大多数星期什么也不会发生",
    "道理很朴素：先看时间花在哪里，再删掉没人需要的东西",
    "现在夜间构建在第一杯咖啡之前就跑完了，而且一直是绿的",
    "如果你的构建很慢，先查缓存键和休眠",
)]


def zh_writer(request: Request):
    user = request.messages[-1]["content"]
    if "<topic>" in user:
        return json.dumps({"title": "夜间构建为什么变快了", "thesis": "夜间构建变快，靠的是先测量、再删除浪费。",
                           "sections": [{"heading": h, "point": p} for h, p in (
                               ("缓存键", "错误的缓存键让每个任务都从零开始。"),
                               ("休眠与不稳定的测试", "被遗忘的休眠既费时间又制造失败。"),
                               ("上传与镜像层", "串行上传和冷镜像层白白浪费时间。"),
                               ("每个任务都有负责人", "每个任务都需要一个会注意到它变慢的人。"))]})
    if user.startswith("写开头"):
        return "".join(ZH_SENTENCES[0:3])
    m = re.match(r"写第 (\d) 节", user)
    if m:
        start = 3 + 6 * (int(m.group(1)) - 1)
        return "".join(ZH_SENTENCES[start:start + 3]) + "\n\n" + "".join(ZH_SENTENCES[start + 3:start + 6])
    if user.startswith("写结尾"):
        return "".join(ZH_SENTENCES[27:30])
    if "你是一名编辑" in request.system:
        paragraph = re.split(r"段落[^\n]*：\n", user, maxsplit=1)[1].split("\n\n你上一次", 1)[0]
        return "说白了，就是这样。" + paragraph
    return "".join(ZH_SENTENCES[25:27])


def test_a_chinese_article_is_planned_written_checked_and_rewritten_in_chinese(tmp_path):
    ctx = make_ctx(tmp_path, zh_writer, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560",
                   PIPELINE_HUMANIZE__THRESHOLD="0", PIPELINE_HUMANIZE__PARAGRAPHS="2")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    assert result["characters"] >= 490
    prompts = [r for r in ctx.llm.requests]
    assert "只输出 JSON" in prompts[0].messages[0]["content"]
    assert all("你是一名工程师" in r.system and "简体中文" in r.system for r in prompts[1:])
    with scoring.using(FakeScorer()):
        humanized = humanize.humanize.fn(ctx, result["article_id"])
    [first, *_] = rewrites(ctx)
    assert "你是一名编辑" in first.system and first.messages[-1]["content"].startswith("文章：")
    assert humanized["rewritten"] == 2
    with ctx.ledger.read() as s:
        body = s.get(Article, humanized["article_id"]).body
    assert body.count("\n## ") == 5 and "说白了" in body and "\n## 参考资料\n\n1. 夜间构建：平台组记下的笔记（作者的笔记" in body


def test_a_sound_one_paragraph_section_is_asked_for_one_more_paragraph_not_written_again(tmp_path):
    # bench, 2026-12-04: 34 of 80 Chinese section calls came back as one paragraph and were written again whole,
    # told "至少要写 2 段", and came back as one paragraph again; one more paragraph is asked for instead.
    def respond(request: Request):
        user = request.messages[-1]["content"]
        if user.startswith("写第 2 节"):
            return "".join(ZH_SENTENCES[9:12])  # three sentences: too few to split in two
        if user.startswith("“休眠与不稳定的测试”一节目前的结尾是"):
            return "".join(ZH_SENTENCES[12:15])
        return zh_writer(request)
    ctx = make_ctx(tmp_path, respond, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    assert result["checks"] == "passed"
    asks = [r.messages[-1]["content"] for r in section_requests(ctx)]
    second = next(k for k, a in enumerate(asks) if a.startswith("写第 2 节"))
    assert sum(a.startswith("写第 2 节") for a in asks) == 1  # not written again
    assert asks[second + 1].startswith("“休眠与不稳定的测试”一节目前的结尾是")
    assert ZH_SENTENCES[11][-12:] in asks[second + 1]  # shown the end of what it wrote
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    section = body.split("## 休眠与不稳定的测试\n\n", 1)[1].split("\n\n## ", 1)[0]
    assert section.split("\n\n") == ["".join(ZH_SENTENCES[9:12]), "".join(ZH_SENTENCES[12:15])]


def test_a_closing_quote_copied_from_the_prompt_onto_a_parts_last_sentence_is_dropped_not_a_fragment(tmp_path):
    # bench, 2026-12-04: each part is shown the previous one's end as 上一部分结尾是：“…”; the Chinese sections ended
    # their own paragraphs with that closing ” ("…读调用栈”"), every one failed as a fragment, and a draft was lost
    # after 371 s.
    def respond(request: Request):
        user = request.messages[-1]["content"]
        if user.startswith("写第 2 节"):
            first, second = zh_writer(request).split("\n\n")
            return f"{first[:-1]}”\n\n“{second[:-1]}”"
        return zh_writer(request)
    ctx = make_ctx(tmp_path, respond, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    assert result["checks"] == "passed"
    assert sum(r.messages[-1]["content"].startswith("写第 2 节") for r in section_requests(ctx)) == 1  # not again
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert "".join(ZH_SENTENCES[9:12]) + "\n\n" + "".join(ZH_SENTENCES[12:15]) in body and "”" not in body
    assert draft.drop_stray_quotes("他说：“先量一量。”我们照做了。") == "他说：“先量一量。”我们照做了。"  # a pair stays
    assert draft.drop_stray_quotes('We called it "the boring fix."') == 'We called it "the boring fix."'
    assert draft.drop_stray_quotes('We deleted the sleeps"') == "We deleted the sleeps."
    assert draft.drop_stray_quotes("删掉休眠以后，失败也消失了。”") == "删掉休眠以后，失败也消失了。"


def test_a_part_that_writes_the_previous_parts_end_back_loses_it_and_is_sampled_away_from_it_next(tmp_path):
    # bench, 2026-12-07: a Chinese draft's parts gave back the previous part's end quoted in their prompt in 8 of 16
    # calls; section 1's repairs gave the same 92 characters back four times in a row (284 s of model time).
    def tail_of(user):
        return re.search(r"上一部分结尾是：“(.+)”$", user, re.S).group(1)

    def respond(request: Request):
        user = request.messages[-1]["content"]
        if user.startswith("写第 1 节"):
            return tail_of(user) if not request.fresh_wording else zh_writer(request)  # all it wrote: the quote
        if user.startswith("写第 2 节"):
            return tail_of(user) + zh_writer(request)  # the quote, then the section
        return zh_writer(request)
    ctx = make_ctx(tmp_path, respond, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    assert result["checks"] == "passed"
    first = [r for r in section_requests(ctx) if r.messages[-1]["content"].startswith("写第 1 节")]
    assert len(first) == 2 and [r.fresh_wording for r in first] == [False, True]
    assert "开头把上一部分的结尾又抄了一遍" in first[1].messages[-1]["content"]
    assert sum(r.messages[-1]["content"].startswith("写第 2 节") for r in section_requests(ctx)) == 1  # not again
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    for sentence in ZH_SENTENCES[0:9]:
        assert body.count(sentence) == 1
    assert draft.without_tail("我们先量了一遍。", "") == ("我们先量了一遍。", False)


def test_a_part_that_echoes_its_instructions_loses_those_paragraphs_and_is_told_why_in_chinese(tmp_path):
    # bench, 2026-12-03: section 3 of a Chinese article opened with its own request and ended with our retry
    # line, whose reason was English; both were published in the held article.
    asks = []

    def echoing(request: Request):
        user = request.messages[-1]["content"]
        if re.match(r"写第 3 节", user):
            asks.append(user)
            prose = zh_writer(request)
            if len(asks) == 1:
                return prose + "\n\n这一段写到一半就"  # it ends mid-sentence: told why, in Chinese
            return ("第 3 节（共 4 节）“上传与镜像层”。本节观点：串行上传和冷镜像层白白浪费时间。\n\n" + prose +
                    "\n\n上一次的回答没有通过：至少要写 2 段，段与段之间空一行。请重写。")
        return zh_writer(request)
    ctx = make_ctx(tmp_path, echoing, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    assert "最后一句没有写完" in asks[1] and "mid-sentence" not in asks[1]
    with ctx.ledger.read() as s:
        body = s.get(Article, result["article_id"]).body
    assert "本节观点" not in body and "请重写" not in body and "".join(ZH_SENTENCES[9:12]) in body
    for text, language in (("第 3 节（共 4 节）“上传与镜像层”。本节观点：串行上传和冷镜像层白白浪费时间。", "zh"),
                           ('Section 3 of 4, "Uploads". Its point: serial uploads waste time, and we fixed that.', "en"),
                           ("The lesson in plain words is that continuous monitoring and feedback are critical.", "en")):
        [meta] = [p for p in art.check("t", text, topic="t", language=language, min_length=0) if p.check == "meta-text"]
        assert "instructions echoed" in meta.message and meta.line == 1


def test_a_sentence_that_echoes_the_closing_instructions_is_dropped_and_the_rest_kept():
    closing = ("The builds got faster once we looked. The lesson in plain words is that monitoring matters. "
               "We would check the cache key first.")
    assert draft.drop_echoes(closing, "en") == "The builds got faster once we looked. We would check the cache key first."
    # bench, 2026-12-03: the closing prompt's own sentence, which no listed pattern knew, ended an article.
    grams = draft.instruction_grams(Prompts().table("parts.en.toml").values(), "en")
    ended = ("We fixed the cache key first, and the rest followed. Do not start with \"In conclusion\"; do not mention "
             "the reader or the post.")
    assert draft.drop_echoes(ended, "en", grams) == "We fixed the cache key first, and the rest followed."
    zh_grams = draft.instruction_grams(Prompts().table("parts.zh.toml").values(), "zh")
    assert draft.drop_echoes("我们先改了缓存键。不要用“总而言之”开头，不要提“读者”或“本文”。", "zh", zh_grams) == "我们先改了缓存键。"
    # and the scripted articles' prose shares no run with the prompts
    assert not draft._grams(" ".join(POOL), "en") & grams and not draft._grams("".join(ZH_SENTENCES), "zh") & zh_grams


def test_a_prompts_wording_used_as_a_label_is_dropped_and_the_sentence_it_labels_kept():
    # bench, 2026-12-04, a stored English section ("One concrete time it happened: …", the angle then): the extend
    # angle's own phrases, each too short for an echo run, labelled three sentences of one paragraph.
    def prompts(language):
        asks = Prompts().table(f"parts.{language}.toml")
        return draft.instruction_grams([*asks.pop("angles"), *asks.values()], language)  # as the writer reads them
    grams = prompts("en")
    labelled = ("What the facts say happened: We were building a large project. What was slow or broken: the "
                "dependencies were not built in parallel. How it was done: We used make -j, and the wait: it went.")
    assert draft.drop_echoes(labelled, "en", grams) == (
        "We were building a large project. The dependencies were not built in parallel. We used make -j, "
        "and the wait: it went.")
    # a label of the writer's own is prose, however it starts
    own = "The cache key: it was wrong. What we changed first: the key."
    assert draft.drop_echoes(own, "en", grams) == own
    zh_grams = prompts("zh")
    assert draft.drop_echoes("哪里出了问题或变慢了：依赖是串行构建的。缓存键：写错了。", "zh", zh_grams) == \
        "依赖是串行构建的。缓存键：写错了。"


def test_a_list_in_a_part_becomes_prose_and_an_empty_item_is_dropped_and_named_by_the_check():
    # make run, 2026-12-03, the published page: "1. … 2. … 3." (nothing after the 3), a paragraph, then "4. …".
    part = ("1. We identified the slow steps in the logs.\n2. We replaced the queries with cached data.\n3.\n\n"
            "We implemented a new build process.\n\n4. We also used a build automation tool.")
    assert draft.clean_part(part) == ("We identified the slow steps in the logs. We replaced the queries with cached "
                                      "data.\n\nWe implemented a new build process.\n\nWe also used a build automation tool.")
    body = GOOD.replace("\n\n## Sleeps", "\n\n1. We cached the keys.\n2. We deleted the sleeps.\n3.\n\n## Sleeps", 1)
    assert any(c == "open list" for c, _ in checks(body))


def test_a_list_joins_the_line_that_introduces_it_and_a_title_line_is_not_prose():
    # A Chinese extension on the embedded model (2026-12-03): "为了进一步优化夜间构建，我们采取了以下措施：" and a
    # list whose items were separated by blank lines; as prose, the colon's paragraph stood alone and failed as a
    # fragment. And an opening began "标题：我们的夜间构建…", a 30-character fragment.
    part = "我们采取了以下措施：\n\n1. **缓存**：我们缓存了依赖。\n\n2. **并行**：我们把测试分成四份。\n\n这样一来构建快了很多。"
    assert draft.clean_part(part) == "我们采取了以下措施：**缓存**：我们缓存了依赖。**并行**：我们把测试分成四份。\n\n这样一来构建快了很多。"
    assert draft.clean_part("We did two things:\n- cached the keys.\n- deleted the sleeps.") == \
        "We did two things: cached the keys. deleted the sleeps."
    assert draft.clean_part("标题：我们的夜间构建为什么变快了\n\n去年秋天，夜间构建要跑四十分钟。") == "去年秋天，夜间构建要跑四十分钟。"
    assert draft.clean_part("**Title:** Why builds got faster\nLast autumn the build took forty minutes.") == \
        "Last autumn the build took forty minutes."


def test_a_sentence_said_again_after_a_code_block_is_deleted_as_the_check_reads_it(tmp_path):
    # A Chinese draft failed its checks on a sentence said again right after a code fence (no blank line between):
    # read at blank lines, the sentence had the code in front of it and was never found to be a repeat.
    ctx = make_ctx(tmp_path, writer())
    topic_id = add_topic(ctx)
    with ctx.ledger.read() as s:
        outline = draft._outline(ctx, s.get(Topic, topic_id))
    w = draft.Writer(ctx, outline)
    w.article()
    said = POOL[4]
    w.bodies[1] = f"{w.bodies[1]}\n\nWe ran it like this:\n```sh\nmake -j4\n```\n{said}"
    w.drop_repeats()
    assert w.body().count(said) == 1 and "make -j4" in w.body()
    assert not [p for p in checks(w.body()) if p[0] == "repeated sentence"]


def test_a_paragraph_whose_colon_introduces_code_or_a_list_is_not_a_fragment():
    # bench, 2026-12-03: a Chinese draft failed on "…在 `pom.xml` 文件中添加以下配置：" followed by its code block.
    code = GOOD.replace("\n\n## Sleeps", "\n\nWe added this to the config:\n\n```toml\nkey = 1\n```\n\n## Sleeps", 1)
    assert not [c for c, _ in checks(code) if c == "fragment"]
    dangling = GOOD.replace("\n\n## Sleeps", "\n\nWe added this to the config:\n\n## Sleeps", 1)
    assert [c for c, _ in checks(dangling) if c == "fragment"]
    assert not draft.part_problems("We cached it.\n\nThe key is now:\n\n```\nhash(lockfile)\n```", "en", 2)


def test_a_rewrite_much_shorter_than_its_paragraph_is_rejected():
    original = " ".join(POOL[3:9])
    short = " ".join(POOL[3:5]).replace("afternoon", "day")
    assert any("keep its length" in why for why in humanize.rewrite_problems(original, short, "en"))
    assert not any("keep its length" in why for why in humanize.rewrite_problems(original, rewrite_of(original), "en"))


def test_a_chinese_retry_line_comes_before_the_paragraph_an_english_one_after_it(tmp_path):
    # bench_rewrites, 2026-12-06: last before the reply, the Chinese retry line was written on into the rewrite (5 of
    # 57 tries, rejected as meta-text); before the paragraph, 0. In English the move cost rises (28 → 24 of 32).
    def short_first(request: Request):
        user = request.messages[-1]["content"]
        if "你是一名编辑" in request.system and not user.startswith("你上一次"):
            return "说白了，就是这样。"  # too short: told so
        return zh_writer(request)
    ctx = make_ctx(tmp_path, short_first, PIPELINE_DRAFT__LANGUAGE="zh", PIPELINE_DRAFT__TARGET_CHARS="560",
                   PIPELINE_HUMANIZE__THRESHOLD="0", PIPELINE_HUMANIZE__PARAGRAPHS="1")
    result = draft.draft.fn(ctx, add_topic(ctx, "夜间构建为什么变快了"))
    with scoring.using(FakeScorer()):
        [record] = humanize.humanize.fn(ctx, result["article_id"])["paragraphs"]
    first, second = rewrites(ctx)[:2]
    assert second.messages[-1]["content"] == f"你上一次的改写没有通过：{record['attempts'][0]['rejected']}。请重新改写这一段。\n\n" \
        + first.messages[-1]["content"]
    assert record["kept"]
    assert humanize.Template(humanize.ASK["en"]).substitute(user="Paragraph: …", retry="Your previous …") == \
        "Paragraph: …\n\nYour previous …"
