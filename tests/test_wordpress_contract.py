"""WordPress as it really answers (issue 9), on the contract fake: each bug the real tier found, caught here too.

The fake (tests/platforms.py ``WordPress``) was corrected against a real
WordPress 6.1 (tests/test_wordpress_real.py): plain permalinks by default,
anonymous-visitor answers for a wrong application password, titles stored
as HTML, ``wpautop``, HTML error pages.
"""

from __future__ import annotations

import html
import re

import httpx
import pytest
from sqlmodel import select

from pipeline.capabilities.publish import publish
from pipeline.errors import ConfigError
from pipeline.ledger.models import Article, Publication
from pipeline.publishing.publish import idempotency_key as _key
from pipeline.publishing.publish import slug_for as _slug
from pipeline.publishing.publishers import PublishOutcomeUnknown, get_publisher
from pipeline.text.content import slugify

from platforms import SECRET_ENV, add_article, make_platform, new_context, write_config

SCRIPT_TITLE = 'Builds <script>alert("x")</script> & "quotes" — 构建 🚀'


@pytest.fixture
def wp(monkeypatch):
    server = make_platform("wordpress")
    monkeypatch.setenv(SECRET_ENV["wordpress"], server.password)
    yield server
    server.stop()


def ctx_for(tmp_path, server, **kw):
    return new_context(write_config(tmp_path, "wordpress", server, **kw))


def retitle(ctx, article, title: str):
    from pipeline.text.content import content_hash

    with ctx.ledger.write() as s:
        row = s.get(Article, article.id)
        row.title, row.content_hash = title, content_hash(title, row.body)
        s.add(row)
    return row


def public_page(url: str) -> str:
    resp = httpx.get(url, timeout=5)
    assert resp.status_code == 200, (url, resp.status_code)
    return resp.text


@pytest.mark.parametrize("permalinks,link", [("plain", r"/\?p=1$"), ("date", r"/\d{4}/\d\d/\d\d/[a-z0-9-]+/$"),
                                             ("postname", r"/[a-z0-9-]+/$")])
def test_publishes_under_every_permalink_setting(tmp_path, wp, permalinks, link):
    """Bug 1: with plain permalinks (a fresh install), /wp-json/ is the front page and nothing was published."""
    wp.permalinks = permalinks
    ctx = ctx_for(tmp_path, wp)
    result = publish.fn(ctx, add_article(ctx).id)
    assert result["verified"] and re.search(link, result["url"]), result["url"]
    assert wp.stats()["posts"] == 1


def test_a_2xx_that_is_not_the_api_is_a_configuration_error(tmp_path, wp):
    """A site whose REST API is hidden answers every URL with a page: say so (exit 2), never "created"."""
    wp.api_blocked = True
    ctx = ctx_for(tmp_path, wp)
    with pytest.raises(ConfigError, match=r"answered 200 with text/html, not the API's JSON") as err:
        publish.fn(ctx, add_article(ctx).id)
    assert "\n" not in str(err.value) and wp.stats()["posts"] == 0


def test_a_redirect_is_a_configuration_error_naming_where_it_goes(tmp_path, wp):
    """Bug 1's other face: the operator saw only "answered 301"."""
    wp.redirect_to = "https://blog.example.com"
    ctx = ctx_for(tmp_path, wp)
    with pytest.raises(ConfigError, match=r"answered 301, a redirect to https://blog.example.com/\?rest_route=.*set url"):
        publish.fn(ctx, add_article(ctx).id)


@pytest.mark.parametrize("role", ["administrator", "author"])
def test_the_title_is_text_on_the_public_page(tmp_path, wp, role):
    """Bug 2: WordPress stores titles as HTML; an administrator's <script> title was served as markup."""
    wp.role = role
    ctx = ctx_for(tmp_path, wp)
    article = retitle(ctx, add_article(ctx), SCRIPT_TITLE)
    result = publish.fn(ctx, article.id)
    page = public_page(result["url"])
    shown = re.search(r'<h1 class="wp-block-post-title">(.*?)</h1>', page, re.S).group(1)
    assert "<script" not in shown.lower()
    assert html.unescape(shown) == SCRIPT_TITLE  # the reader sees the title as written, tags and all, as text


@pytest.mark.slow  # seconds of retries
def test_a_wrong_password_on_the_lookup_path_names_the_credentials(tmp_path, wp, monkeypatch):
    """Bug 3: after a crash the lookup comes first; WordPress answers it 400 rest_forbidden_status, not 401."""
    ctx = ctx_for(tmp_path, wp)
    article = add_article(ctx)
    key = _key(ctx.run_id, article)
    with ctx.ledger.write() as s:  # what a crash after the platform call leaves: a pending row
        s.add(Publication(run_id=ctx.run_id, article_id=article.id, idempotency_key=key, target="wordpress",
                          content_hash=article.content_hash))
    monkeypatch.setenv(SECRET_ENV["wordpress"], "wrong pass word")
    ctx = new_context(write_config(tmp_path, "wordpress", wp), run_id=ctx.run_id)
    with pytest.raises(ConfigError) as err:
        publish.fn(ctx, article.id)
    msg = str(err.value)
    assert "application password" in msg and SECRET_ENV["wordpress"] in msg and "'editor'" in msg
    assert "\n" not in msg and "wrong pass word" not in msg
    assert wp.stats()["posts"] == 0


def test_a_wrong_password_on_create_names_the_credentials(tmp_path, wp, monkeypatch):
    monkeypatch.setenv(SECRET_ENV["wordpress"], "wrong pass word")
    ctx = ctx_for(tmp_path, wp)
    with pytest.raises(ConfigError, match=r"401 .*rest_cannot_create|401 .*not allowed") as err:
        publish.fn(ctx, add_article(ctx).id)
    assert "application password" in str(err.value) and SECRET_ENV["wordpress"] in str(err.value)


def test_the_marker_makes_no_empty_paragraph_and_keeps_the_key_off_the_public_page(tmp_path, wp):
    """Bug 4: two bare comments became <p><!-- … --><br />…</p>, with the full key in public HTML."""
    ctx = ctx_for(tmp_path, wp)
    article = add_article(ctx)
    result = publish.fn(ctx, article.id)
    body = re.search(r'<div class="entry-content">(.*?)</div>', public_page(result["url"]), re.S).group(1)
    label, _, rest = body.lstrip().partition("</p>")  # the disclosure's line leads (pipeline.text.disclosure)
    assert label.startswith('<p class="ai-disclosure"')
    assert rest.lstrip().startswith("<p>Forty minutes.")  # then the article's own first paragraph
    key = _key(ctx.run_id, article)
    assert key not in body and key[:16] not in body
    # The raw content still carries it: find() tells this post from another with the same slug.
    found = get_publisher(ctx.settings.publish, ctx.settings.base_dir).find(key=key, slug=_slug(article, key))
    assert found.key == key and found.content_hash == article.content_hash


def test_a_500_with_an_html_page_is_reported_as_what_it_was(tmp_path, wp):
    """Bug 5: the database down (500 and an HTML page) was reported as "no answer to the create call"."""
    wp.database_down = True
    ctx = ctx_for(tmp_path, wp)
    with pytest.raises(PublishOutcomeUnknown) as err:
        publish.fn(ctx, add_article(ctx).id)
    msg = str(err.value)
    assert "no answer" not in msg
    assert "answered 500 (Error establishing a database connection)" in msg
    assert "<h1>" not in msg and "<!DOCTYPE" not in msg


def test_chinese_titles_get_readable_slugs(tmp_path, wp):
    """Bug 8: every Chinese character was dropped, leaving a-12-3f9c…"""
    assert slugify("为什么我们的夜间构建变快了", "a1-0123abcd") == "wei-shi-yao-wo-men-de-ye-jian-gou-jian-bian-kuai-liao-a1-0123abcd"
    assert slugify("🚀 <script> & 构建", "a2-k") == "script-gou-jian-a2-k"
    assert slugify("🚀🚀", "a3-k") == "a3-k"
    ctx = ctx_for(tmp_path, wp)
    article = retitle(ctx, add_article(ctx), "为什么我们的夜间构建变快了")
    publish.fn(ctx, article.id)
    [post] = wp.posts
    assert post.slug.startswith("wei-shi-yao-wo-men") and post.slug.isascii()


# --- bug 6: a per-run budget of platform attempts ----------------------------------


def _refusing_url() -> str:
    import socket

    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


class Hanging:
    """A host that accepts connections and never answers (a hung PHP, a black-holed proxy)."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns = []
        self.stopped = False

        def accept():
            while not self.stopped:
                try:
                    self.conns.append(self.sock.accept()[0])
                except OSError:
                    return

        threading.Thread(target=accept, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.stopped = True
        self.sock.close()
        for c in self.conns:
            c.close()


def _wordpress_extra(url: str, recorder_base: str, timeout_s: float, window_s: float) -> str:
    return f"""
[publish]
target = "wordpress"
timeout_s = {timeout_s}
backoff_s = 0.05
unavailable_after_s = {window_s}

[publish.wordpress]
url = "{url}"
username = "editor"
password_env = "{SECRET_ENV['wordpress']}"

[alerts]
webhook_url = "{recorder_base}/hook"
"""


@pytest.fixture
def recorder():
    from support import Recorder

    rec = Recorder()
    yield rec
    rec.server.shutdown()


@pytest.mark.slow  # seconds of timeouts and retries
@pytest.mark.parametrize("host", ["refusing", "hanging"])
def test_with_the_platform_down_the_run_ends_fast_with_exit_6_and_an_alert(harness, recorder, host, monkeypatch):
    """Bug 6: every publish call tried again until max_turns (21 calls, 63 connections; 16 min on a hanging host)."""
    monkeypatch.setenv(SECRET_ENV["wordpress"], "pw")
    hanging = Hanging() if host == "hanging" else None
    url = hanging.url if hanging else _refusing_url()
    try:
        outcome, ledger = harness.run("honest", _wordpress_extra(url, recorder.base, timeout_s=1.0, window_s=3.0))
    finally:
        if hanging:
            hanging.close()
    assert outcome.exit_code == 6 and outcome.status == "platform_unavailable", outcome
    assert "platform unavailable" in outcome.error
    publishes = [e for e in ledger.executions(outcome.run_id) if e.capability == "publish"]
    assert 1 <= len(publishes) <= 3
    # From the first publish to the run's end, bounded by the budget: a refusing host within a second of
    # retries, a hanging one by the window (3 s) plus one request timeout (1 s) and a little slack.
    took = (ledger.get_run(outcome.run_id).finished_at - publishes[0].started_at).total_seconds()
    assert took < (1.5 if host == "refusing" else 3 + 1 + 1.5), took
    alerts = [body["text"] for path, body in recorder.hits if path == "/hook"]
    assert len(alerts) == 1 and "platform_unavailable (exit 6)" in alerts[0]
    with ledger.read() as s:
        statuses = {r.status for r in s.exec(select(Publication)).all()}
    # Refused connections never sent the post ("failed"); a hanging create may have landed ("pending": the
    # next run's recovery asks the platform).
    assert statuses == ({"failed"} if host == "refusing" else {"pending"})


def test_the_budget_is_per_run_not_per_call(tmp_path, wp):
    """Three publish calls share one budget: the third refuses to call the platform at all."""
    from pipeline.errors import PlatformUnavailableError

    wp.fail_next(503, times=100)
    ctx = ctx_for(tmp_path, wp, retries=1)
    ctx.settings.publish.max_failed_attempts = 4
    article = add_article(ctx)
    for _ in range(2):  # 2 failed creates each: 4 failures
        with pytest.raises(Exception) as err:
            publish.fn(ctx, article.id)
        assert not isinstance(err.value, PlatformUnavailableError)
    posts_before = len(wp.log)
    with pytest.raises(PlatformUnavailableError, match="4 failed request"):
        publish.fn(ctx, article.id)
    assert len(wp.log) == posts_before  # not one more request


# --- bugs 3 and 7 at the level of a run ------------------------------------------


def _wp_extra(server) -> str:
    return f"""
[publish]
target = "wordpress"
timeout_s = 3
backoff_s = 0.01

[publish.wordpress]
url = "{server.base_url}"
username = "editor"
password_env = "{SECRET_ENV['wordpress']}"
"""


@pytest.mark.slow  # seconds of timeouts and retries
def test_the_next_run_registers_what_an_interrupted_run_published(harness, wp, monkeypatch):
    """Bug 7 / issue 14 item 5: published and verified, then SIGTERM before register; the next run completes it."""
    from pipeline.ledger.models import Registration

    harness.config("honest", _wp_extra(wp))
    dead = new_context(harness.dir / "config.toml")
    assert publish.fn(dead, add_article(dead, "\nInterrupted.").id)["verified"]
    dead.ledger.finish_run(dead.run_id, "interrupted", 130, "stop requested; stopped between two steps")
    outcome, ledger = harness.run("honest", _wp_extra(wp))
    assert outcome.exit_code == 0, outcome
    with ledger.read() as s:
        regs = {r.run_id: r.registration_no for r in s.exec(select(Registration)).all()}
    assert set(regs) == {dead.run_id, outcome.run_id}  # the interrupted run's publication, and this run's own
    _again, _ = harness.run("honest", _wp_extra(wp))
    with ledger.read() as s:
        assert len(s.exec(select(Registration)).all()) == 3  # nothing registered twice
    assert wp.stats()["duplicates"] == 0


def test_recovery_with_a_changed_password_ends_the_run_with_exit_2_naming_the_credentials(harness, wp, monkeypatch):
    """Bug 3: the crashed run's pending row stayed pending and the operator never heard "credentials"."""
    harness.config("honest", _wp_extra(wp))
    dead = new_context(harness.dir / "config.toml")
    article = add_article(dead, "\nCrashed.")
    with dead.ledger.write() as s:
        s.add(Publication(run_id=dead.run_id, article_id=article.id, idempotency_key=_key(dead.run_id, article),
                          target="wordpress", content_hash=article.content_hash))
    dead.ledger.finish_run(dead.run_id, "crashed", None, "killed")
    monkeypatch.setenv(SECRET_ENV["wordpress"], "changed pass word")
    outcome, ledger = harness.run("honest", _wp_extra(wp))
    assert outcome.exit_code == 2 and outcome.status == "error", outcome
    assert "application password" in outcome.error and SECRET_ENV["wordpress"] in outcome.error
    assert ledger.get_run(outcome.run_id).exit_code == 2
    with ledger.read() as s:
        assert s.exec(select(Publication)).one().status == "pending"  # still unknown, for the next run
