"""publish and register: idempotent, verified, never a fabricated or off-allowlist URL."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlmodel import select

from pipeline import config
from pipeline.capabilities.publish import publish
from pipeline.capabilities.register import register
from pipeline.errors import CapabilityError
from pipeline.ledger.models import Article, Publication, Registration
from pipeline.ledger.writer import Ledger
from pipeline.score.scoring import score
from pipeline.text.content import content_hash
from pipeline.tools.prompts import Prompts
from pipeline.tools.toolbox import RunContext

from scenarios import HUMANIZED

# The guard and publishing read and write the ledger: run them on both backends.
LEDGER_BACKENDS = ("sqlite", "postgresql")


def make_ctx(tmp_path, **env):
    cfg = config.load(tmp_path / "none.toml" if False else None, environ={
        "PIPELINE_LEDGER__URL": f"sqlite:///{tmp_path}/ledger.db", "PIPELINE_PUBLISH_LOCAL__DIR": str(tmp_path / "site"), **env})
    ledger = Ledger(cfg.ledger_url)
    run = ledger.start_run("m")
    return RunContext(run.id, cfg.run_settings(), ledger, llm=None, prompts=Prompts())


def add_article(ctx, kind="humanized", text=HUMANIZED):
    title, body = text.split("\n", 1)[0].lstrip("# "), text.split("\n", 1)[1].strip()
    s = score(text)
    with ctx.ledger.write() as session:
        a = Article(run_id=ctx.run_id, kind=kind, title=title, body=body, language="en",
                    content_hash=content_hash(title, body), score=s.total)
        session.add(a)
    return a


@pytest.fixture
def served_site(tmp_path):
    (tmp_path / "site").mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "site"))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_publish_verifies_over_http_when_the_site_is_served(tmp_path, served_site):
    ctx = make_ctx(tmp_path, PIPELINE_PUBLISH_LOCAL__BASE_URL=served_site)
    result = publish.fn(ctx, add_article(ctx).id)
    assert result["verified"] and result["url"].startswith(served_site)
    with ctx.ledger.read() as s:
        row = s.exec(select(Publication)).one()
    assert row.status == "verified" and row.verified_at is not None


def test_publish_is_idempotent_within_a_run(tmp_path):
    ctx = make_ctx(tmp_path)
    article = add_article(ctx)
    first = publish.fn(ctx, article.id)
    again = publish.fn(ctx, article.id)
    other = publish.fn(ctx, add_article(ctx).id)  # a second article in the same run is not published either
    assert again["publication_id"] == other["publication_id"] == first["publication_id"]
    assert again["replayed"] and other["replayed"]
    assert len(list((tmp_path / "site" / "posts").glob("*.html"))) == 1


def test_off_allowlist_url_is_never_verified_nor_registered(tmp_path):
    ctx = make_ctx(tmp_path, PIPELINE_PUBLISH__ALLOWED_DOMAINS='["example.com"]')
    with pytest.raises(CapabilityError, match="allowed_domains"):
        publish.fn(ctx, add_article(ctx).id)
    with ctx.ledger.read() as s:
        row = s.exec(select(Publication)).one()
    # Written, not verified: withdrawn from the site, and pending for the next attempt to reuse.
    assert row.status == "pending" and row.verification.endswith("; withdrawn")
    assert list((tmp_path / "site" / "posts").glob("*.html")) == []
    with pytest.raises(CapabilityError, match="not verified"):
        register.fn(ctx, row.id)


def test_page_missing_on_the_server_is_unverified(tmp_path, served_site):
    # The site is served from another directory: the page we wrote is not there, so HEAD answers 404.
    ctx = make_ctx(tmp_path, PIPELINE_PUBLISH_LOCAL__BASE_URL=served_site,
                   PIPELINE_PUBLISH_LOCAL__DIR=str(tmp_path / "elsewhere"))
    with pytest.raises(CapabilityError, match="404"):
        publish.fn(ctx, add_article(ctx).id)


def test_drafts_and_low_scores_are_not_published(tmp_path):
    ctx = make_ctx(tmp_path)
    with pytest.raises(CapabilityError, match="draft"):
        publish.fn(ctx, add_article(ctx, kind="draft").id)
    ctx2 = make_ctx(tmp_path / "b", PIPELINE_HUMANIZE__THRESHOLD="99.9")
    with pytest.raises(CapabilityError, match="below the threshold"):
        publish.fn(ctx2, add_article(ctx2).id)
    with pytest.raises(CapabilityError, match="no article 999"):
        publish.fn(ctx, 999)


def test_registration_numbers_are_sequential_and_idempotent(tmp_path):
    numbers = []
    for i in range(3):
        ctx = make_ctx(tmp_path)
        pub = publish.fn(ctx, add_article(ctx, text=HUMANIZED + f"\nRun {i}.").id)
        first = register.fn(ctx, pub["publication_id"])
        assert register.fn(ctx, pub["publication_id"]) == first
        numbers.append(first["registration_no"])
    day = numbers[0].split("-")[1]
    assert numbers == [f"CT-{day}-001", f"CT-{day}-002", f"CT-{day}-003"]
    with ctx.ledger.read() as s:
        assert len(s.exec(select(Registration)).all()) == 3


def test_register_only_this_runs_publication(tmp_path):
    a = make_ctx(tmp_path)
    pub = publish.fn(a, add_article(a).id)
    b = make_ctx(tmp_path)
    with pytest.raises(CapabilityError, match="no publication"):
        register.fn(b, pub["publication_id"])


def test_stored_score_recomputes_identically(tmp_path):
    ctx = make_ctx(tmp_path)
    add_article(ctx)
    with ctx.ledger.read() as s:
        a = s.exec(select(Article)).one()
    assert score(f"# {a.title}\n\n{a.body}").total == a.score
