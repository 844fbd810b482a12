"""Articles from sources (issue 48): sources gathered and stored once, facts with spans, the grounding check,
citations, the draft refusing a topic with no source, and the diff printing what no source backs. ScriptedModel
and loopback HTTP only."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from sqlmodel import select
from test_article import add_topic, make_ctx, writer

from pipeline.capabilities import draft
from pipeline.ledger.models import Article, Source, SourceFact, TopicSource
from pipeline.sources import cite, gather, grounding, research
from pipeline.sources.specifics import arabic, chinese_number, specifics
from pipeline.states import Grounded
from pipeline.views.diff import run_diff

from support import SOURCED_BACKLOG

NOTES = SOURCED_BACKLOG.parent / "notes.md"


def index(text: str, kind: str = "notes", language: str = "en") -> grounding.Index:
    return grounding.Index([grounding.SourceText(1, kind, "Notes", text)], language)


def verdict(sentence: str, source: str, kind: str = "notes", language: str = "en") -> grounding.Statement:
    [row] = grounding.check("", sentence, index(source, kind, language)).statements[1:]
    return row


# --- specifics, normalised ---------------------------------------------------------------------

def test_a_figure_is_one_key_however_its_unit_or_numeral_is_written():
    keys = lambda s, lang="en": [sp.key for sp in specifics(s, lang) if sp.kind == "number"]  # noqa: E731
    assert keys("It took 41 min.") == keys("It took 41 minutes.") == keys("它花了41分钟。", "zh") == ["41 min"]
    assert keys("It took forty-one minutes.") == ["41 min"] and keys("a 12 % cut") == keys("a 12% cut") == ["12 %"]
    assert chinese_number("四十一") == 41 and chinese_number("一千二百") == 1200 and chinese_number("二〇二六") == 2026
    assert arabic("从四十一分钟降到十七分钟，一个办法") == "从41分钟降到17分钟，一个办法"  # 一个 is no figure
    assert keys("1,200 runs and 3.50 s") == ["1200", "3.5 s"]


def test_names_code_identifiers_links_and_quotations_are_specifics_plain_words_are_not():
    found = {(sp.kind, sp.text) for sp in specifics(
        'As the SQLite docs say, "WAL mode lets readers proceed", so set busy_timeout with `PRAGMA busy_timeout=5000;` '
        "per https://sqlite.org/wal.html.", "en")}
    assert {("name", "SQLite"), ("name", "WAL"), ("identifier", "busy_timeout"), ("code", "PRAGMA busy_timeout=5000;"),
            ("url", "https://sqlite.org/wal.html"), ("quote", "WAL mode lets readers proceed")} <= found
    assert specifics("Caching helped most, and the team agreed.", "en") == []  # a capital where a sentence starts
    assert [sp.text for sp in specifics("我们用 Gradle 缓存，API 调用没变。", "zh") if sp.kind == "name"] == ["Gradle"]


# --- the grounding check ---------------------------------------------------------------------------

SOURCE = ("- The nightly build on Jenkins took 41 minutes in March 2026 and 17 minutes in May.\n"
          "- We added `pytest -n 4` with pytest-xdist.\n")


@pytest.mark.parametrize("sentence, status, missing", [
    ("The build went from 41 min to 17 minutes.", Grounded.SUPPORTED, []),  # unit variants
    ("The build on Jenkins went from forty-one minutes to seventeen minutes.", Grounded.SUPPORTED, []),
    ("The build on Jenkins went from 41 minutes to 15 minutes.", Grounded.UNSUPPORTED, ["15 minutes"]),  # right name,
    ("The build on Jenkins took 41 seconds.", Grounded.UNSUPPORTED, ["41 seconds"]),  # wrong number or unit
    ("The build moved to CircleCI.", Grounded.UNSUPPORTED, ["CircleCI"]),
    ("We ran `pytest -n 4` on every push.", Grounded.SUPPORTED, []),
    ("We ran `pytest -n auto` on every push.", Grounded.UNSUPPORTED, ["pytest -n auto"]),
    ("Nothing about it was hard.", Grounded.NO_SPECIFICS, []),
])
def test_every_specific_is_looked_up_in_the_sources(sentence, status, missing):
    row = verdict(sentence, SOURCE)
    assert (row.status, row.unsupported) == (status, missing)
    if status == Grounded.SUPPORTED:
        assert row.support and row.support[0]["source"] == 1 and row.support[0]["text"] in SOURCE


def test_a_chinese_figure_in_chinese_numerals_is_the_sources_arabic_one():
    zh = "- 夜间构建在 2026 年 3 月要 41 分钟，5 月降到 17 分钟。\n"
    assert verdict("夜间构建从四十一分钟降到了十七分钟。", zh, language="zh").status == Grounded.SUPPORTED
    assert verdict("夜间构建从四十一分钟降到了十五分钟。", zh, language="zh").unsupported == ["15分钟"]


def test_first_person_is_the_operators_notes_alone_and_a_web_pages_words_are_quoted_or_not_used():
    page = ("WAL mode lets many readers proceed at the same time as a single writer, because the writer appends "
            "its changes to a separate log file instead of the database.")
    assert verdict("We turned on WAL mode.", "We turned on WAL mode.", kind="notes").status == Grounded.SUPPORTED
    assert verdict("We turned on WAL mode.", "Turn on WAL mode.", kind="web").status == Grounded.FIRST_PERSON
    copied = ("In WAL mode many readers proceed at the same time as a single writer, because the writer appends its "
              "changes to a separate log file.")
    assert verdict(copied, page, kind="web").status == Grounded.COPIED
    quoted = 'The page puts it plainly: "the writer appends its changes to a separate log file instead of the database".'
    assert verdict(quoted, page, kind="web").status == Grounded.SUPPORTED
    assert verdict('It says "the writer rewrites the database in place".', page, kind="web").unsupported == [
        "the writer rewrites the database in place"]  # a quotation must be the page's words


def test_a_failing_sentence_taken_out_leaves_the_rest_of_its_paragraph():
    body = ("The build took 41 minutes. It then moved to CircleCI. That was in March.\n\n## Next\n\n"
            "We added `pytest -n 4`.")
    found = grounding.check("", body, index(SOURCE))
    assert [s.text for s in found.failing] == ["It then moved to CircleCI."]
    assert grounding.without_failing(body, found, "en").startswith("The build took 41 minutes. That was in March.\n\n## Next")


# --- citations -------------------------------------------------------------------------------------------

def test_every_paragraph_with_a_traced_statement_cites_its_source_and_every_section_cites_one():
    sources = [SimpleNamespace(kind="notes", title="Build notes", url=None, location="/x/notes.md"),
               SimpleNamespace(kind="web", title="pytest-xdist", url="http://127.0.0.1/xdist", location="http://127.0.0.1/xdist")]
    idx = grounding.Index([grounding.SourceText(1, "notes", "Build notes", SOURCE),
                           grounding.SourceText(2, "web", "pytest-xdist", "The plugin pytest-xdist runs tests "
                                                "in parallel worker processes chosen with the -n option.")], "en")
    body = ("The build took 41 minutes in March.\n\n## Parallel tests\n\nThe tests now run in parallel worker processes.\n\n"
            "## Plain\n\nNothing else changed.")
    cited = cite.cite(body, grounding.check("", body, idx), idx, sources, "en")
    assert "in March. [1]" in cited and "worker processes. [2]" in cited
    assert "Nothing else changed. [1]" in cited  # a section nothing could be traced in cites the closest source
    assert cited.endswith("## Sources\n\n1. Build notes (the author's notes, notes.md)\n2. [pytest-xdist](http://127.0.0.1/xdist)")
    zh = cite.sources_list(sources[:1], [1], "zh")
    assert zh == ["## 参考资料", "1. Build notes（作者的笔记，notes.md）"]


# --- gathering --------------------------------------------------------------------------------------------

PAGE = """<html><head><title>Idempotency keys, explained</title></head><body><nav>Home | Blog | About</nav>
<article><h1>Idempotency keys, explained</h1>
<p>An idempotency key is a value the client sends with a request so that the server can recognise a retry of it.</p>
<p>Stripe keeps a key for 24 hours, and a retry with the same key within that window returns the first result
instead of charging the card again.</p>
<p>The key must be generated once per operation by the client, not once per HTTP attempt.</p></article>
<footer>Copyright 2026</footer></body></html>"""


@pytest.fixture
def site():
    """A loopback web server: /page.html, /big.html (over the size cap), /feed.xml whose item links to /page.html."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body, ctype = {"/page.html": (PAGE, "text/html"), "/big.html": ("<p>" + "x" * (gather.MAX_BYTES + 10), "text/html"),
                           "/feed.xml": (FEED.replace("BASE", base), "application/atom+xml")}.get(self.path, ("", ""))
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", ctype or "text/plain")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    base = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield base
    server.shutdown()


FEED = """<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><title>Idempotency keys explained</title><link href="BASE/page.html"/><id>1</id><updated>2026-12-01T00:00:00Z</updated>
<summary>why retries must never charge twice</summary></entry></feed>"""


def test_a_page_is_fetched_with_bounds_its_main_text_extracted_and_other_schemes_refused(site, tmp_path):
    [page] = gather.read(f"{site}/page.html", tmp_path, 5)
    assert (page.kind, page.url, page.title) == ("web", f"{site}/page.html", "Idempotency keys, explained")
    assert "Stripe keeps a key for 24 hours" in page.text and "Home | Blog" not in page.text
    with pytest.raises(ValueError, match="limit"):
        gather.read(f"{site}/big.html", tmp_path, 5)
    with pytest.raises(ValueError, match="404"):
        gather.read(f"{site}/gone.html", tmp_path, 5)
    with pytest.raises(ValueError, match="'file:' sources are not read"):
        gather.read("file:///etc/passwd", tmp_path, 5)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n- one fact here that is long enough.\n")
    (tmp_path / "notes" / "b.bin").write_bytes(b"\0")
    assert [r.kind for r in gather.read("notes", tmp_path, 5)] == ["notes"]  # a folder: its text files
    assert gather.gather(["missing.md", "notes/a.md"], tmp_path, 5)[0].location.endswith("a.md")  # one bad, skipped


def test_a_feed_items_linked_page_is_the_topics_source_stored_once(site, tmp_path):
    ctx = make_ctx(tmp_path, PIPELINE_TOPIC__BACKLOG='""', PIPELINE_TOPIC__FEEDS=json.dumps([f"{site}/feed.xml"]))
    from pipeline.capabilities.topic import topic
    picked = topic.fn(ctx)
    assert picked["title"] == "Idempotency keys explained" and picked["sources"] == [
        f"Idempotency keys, explained ({site}/page.html)"]
    gather.store(ctx.ledger, picked["topic_id"], gather.gather([f"{site}/page.html"], tmp_path, 5))
    with ctx.ledger.read() as s:
        assert len(s.exec(select(Source)).all()) == 1 and len(s.exec(select(TopicSource)).all()) == 1  # same text: one row


# --- research ------------------------------------------------------------------------------------------------

def test_short_notes_are_every_one_a_fact_and_a_long_source_is_narrowed_by_the_model_keeping_spans(tmp_path):
    ctx = make_ctx(tmp_path, writer())
    topic_id = add_topic(ctx)
    from pipeline.ledger.models import Topic
    with ctx.ledger.read() as s:
        t = s.get(Topic, topic_id)
    sources = gather.of_topic(ctx.ledger, topic_id)
    facts = research.facts_of(ctx, t, sources, "en")
    assert len(facts) == len(research.candidates(sources, "en")) <= research.MAX_FACTS
    assert all(sources[0].text[f.start:f.end] == f.statement for f in facts)  # as written, with its span
    assert not ctx.llm.requests  # no model call for notes this short

    long = [SimpleNamespace(id=7, kind="web", title="t", text="\n".join(
        f"- Step {i} of the migration took {i + 2} minutes on the staging database." for i in range(60)))]

    def chooser(request):
        return json.dumps({"facts": [{"n": 1, "statement": "Step 0 took 2 minutes."},
                                     {"n": 2, "statement": "Step 1 took 90 minutes."}]})  # the second says more
    ctx2 = make_ctx(tmp_path / "b", chooser)
    chosen = research.choose(ctx2, SimpleNamespace(title="Migration steps", angle=""), research.candidates(long, "en"), "en")
    assert [s for _, s in chosen] == ["Step 0 took 2 minutes.", "Step 1 of the migration took 3 minutes on the staging database."]
    assert "<sentences>" in ctx2.llm.requests[0].messages[0]["content"]


# --- the draft ------------------------------------------------------------------------------------------------

def test_a_topic_with_no_source_is_not_drafted_and_says_how_to_give_it_one(tmp_path):
    ctx = make_ctx(tmp_path, writer())
    with pytest.raises(gather.NoSources, match=r"has no usable source, so it is not drafted: name notes files"):
        draft.draft.fn(ctx, add_topic(ctx, sources=[]))
    assert not ctx.llm.requests


def test_the_draft_is_written_from_the_facts_and_an_invented_specific_is_repaired_then_removed(tmp_path):
    invent = {"n": 0}

    def inventing(request, user):
        if user.startswith("Write section 2 of"):
            invent["n"] += 1
            # First an invented tool and figure; asked again, still one invented figure.
            extra = " We moved it to CircleCI in 2019." if invent["n"] == 1 else " It took 300 minutes."
            return part_for_section(2) + extra
        return None
    ctx = make_ctx(tmp_path, writer(inventing))
    result = draft.draft.fn(ctx, add_topic(ctx))
    section_asks = [r.messages[-1]["content"] for r in ctx.llm.requests if r.messages[-1]["content"].startswith("Write section 2")]
    assert "Facts to write it from:\n- " in section_asks[0]  # each part is given its facts
    assert "'2019', 'CircleCI' are in no source" in section_asks[1]  # told which, as the other checks tell
    system = next(r.system for r in ctx.llm.requests if r.system)
    assert "first person plural" in system  # the notes are the team's own
    outline_ask = ctx.llm.requests[0].messages[-1]["content"]
    assert "<facts>\n" in outline_ask and "\n- We cut the nightly build from 40 minutes to 9, and most of it was boring…\n" in outline_ask
    with ctx.ledger.read() as s:
        row = s.get(Article, result["article_id"])
        assert len(s.exec(select(SourceFact)).all()) == result["facts"] > 0
    data = json.loads(row.grounding_json)
    assert "300 minutes" not in row.body and "CircleCI" not in row.body  # still unsupported: taken out
    assert [r["unsupported"] for r in data["removed"]] == [["300 minutes"]] and result["unsupported_removed"] == 1
    assert data["summary"]["unsupported"] == 0

    diff = run_diff(ctx.ledger, ctx.run_id)
    assert [(u.text, u.removed) for u in diff.statements] == [("It took 300 minutes.", True)] and diff.unsourced == []


def part_for_section(k: int) -> str:
    from scenarios import part_for
    return part_for(f"Write section {k} of 4")


def test_the_diff_prints_an_article_statement_no_source_backs_beside_the_claims(tmp_path):
    ctx = make_ctx(tmp_path, writer())
    topic_id = add_topic(ctx)
    body = "The build took 41 minutes on Jenkins."
    checked = grounding.check("T", body, index("The build took 40 minutes."))
    with ctx.ledger.write() as s:
        s.add(Article(run_id=ctx.run_id, topic_id=topic_id, kind="humanized", title="T", body=body, language="en",
                      content_hash="x", grounding_json=json.dumps(checked.as_json())))
    diff = run_diff(ctx.ledger, ctx.run_id)
    assert [(u.unsupported, u.removed) for u in diff.unsourced] == [(["41 minutes", "Jenkins"], False)]
    assert diff.as_dict()["unsourced"][0]["text"] == body


def test_an_outline_whose_thesis_states_a_figure_no_source_holds_is_asked_again_told_which(tmp_path):
    from scenarios import outline_for

    def planner(request, user):
        if "<topic>" not in user:
            return None
        plan = outline_for(user)
        if "which no fact says" not in user:
            plan["thesis"] = "We cut the build from 41 minutes to 2 minutes on Bamboo."
        return json.dumps(plan)
    ctx = make_ctx(tmp_path, writer(planner))
    draft.draft.fn(ctx, add_topic(ctx))
    asks = [r.messages[-1]["content"] for r in ctx.llm.requests if "<topic>" in r.messages[-1]["content"]]
    assert len(asks) == 2 and "state 41 minutes, 2 minutes, Bamboo, which no fact says" in asks[1]


def test_every_platform_gets_the_sources_the_webhook_as_data_wechat_as_its_read_more_link():
    from pipeline.publishing.publishers import wechat
    from pipeline.text import article as art
    body = ("Text. [1][2]\n\n## Sources\n\n1. Build notes (the author's notes, notes.md)\n"
            "2. [pytest-xdist](http://127.0.0.1/xdist)")
    assert art.sources_listed(body) == [{"n": 1, "title": "Build notes (the author's notes, notes.md)", "url": None},
                                        {"n": 2, "title": "pytest-xdist", "url": "http://127.0.0.1/xdist"}]
    assert wechat.first_link(body) == "http://127.0.0.1/xdist" and wechat.first_link("Text.") == ""
    assert art.without_sources(body) == "Text."


def test_a_failing_list_item_is_taken_out_and_sources_with_nothing_to_state_are_no_sources(tmp_path):
    body = "Two changes:\n\n- The build took 41 minutes.\n- It moved to CircleCI."
    found = grounding.check("", body, index(SOURCE))
    assert grounding.without_failing(body, found, "en") == "Two changes:\n\n- The build took 41 minutes."
    (tmp_path / "thin.md").write_text("# Title only\n\n2026\n", encoding="utf-8")
    ctx = make_ctx(tmp_path, writer())
    with pytest.raises(gather.NoSources):
        draft.draft.fn(ctx, add_topic(ctx, sources=[tmp_path / "thin.md"]))


def test_sentences_still_unsupported_are_taken_out_of_their_parts_and_the_draft_lengthened_to_its_floor(tmp_path):
    # CI's real-server tier, 2026-12-08: taken out of the assembled article, a draft fell to 628 of 700 words and
    # was lost. Every section keeps inventing a figure; the article still reaches its floor, without one of them.
    def inventing(request, user):
        m = re.match(r"Write section (\d) of", user)
        if m:
            return part_for_section(int(m.group(1))) + " It took 300 minutes on Bamboo."
        return None
    ctx = make_ctx(tmp_path, writer(inventing))
    result = draft.draft.fn(ctx, add_topic(ctx))
    with ctx.ledger.read() as s:
        row = s.get(Article, result["article_id"])
    assert "300 minutes" not in row.body and "Bamboo" not in row.body
    assert result["words"] >= ctx.settings.draft.min_length() and result["unsupported_removed"] >= 1
    with ctx.ledger.read() as s:
        [*_, part] = [r for r in ctx.llm.requests if r.messages[-1]["content"].startswith("Write section 1 of")]
    assert "'300 minutes', 'Bamboo' are in no source" in part.messages[-1]["content"]  # repaired first, told which
