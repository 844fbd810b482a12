"""Each publisher against its platform's contract server: the happy path and every way a platform fails.

The servers (tests/platforms.py) check credentials and store posts the way
the real APIs do, so these tests catch a wrong request shape, a bad JWT, a
leaked secret or a duplicate post, not just a wrong return value.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import xml.etree.ElementTree as ET
from datetime import datetime
from importlib import metadata

import pytest
from sqlmodel import select

from pipeline.capabilities.publish import publish
from pipeline.errors import CapabilityError, ConfigError, PublicationFailed
from pipeline.ledger.models import Publication
from pipeline.publishing import publishers
from pipeline.publishing.publish import idempotency_key as _key
from pipeline.publishing.publish import slug_for as _slug
from pipeline.publishing.publishers import LookupUnsupported, PublishOutcomeUnknown, get_publisher
from pipeline.publishing.publishers.ghost import admin_token

from platforms import (
    SECRET_ENV,
    add_article,
    make_platform,
    new_context,
    secret_env,
    write_config,
)

REMOTE = ["wordpress", "ghost", "webhook"]


@pytest.fixture(params=REMOTE)
def target(request):
    return request.param


@pytest.fixture
def platform(target, monkeypatch):
    server = make_platform(target)
    for name, value in secret_env(target, server).items():
        monkeypatch.setenv(name, value)
    yield server
    server.stop()


def ctx_for(tmp_path, target, platform, **kw):
    return new_context(write_config(tmp_path, target, platform, **kw))


def row_of(ctx) -> Publication:
    with ctx.ledger.read() as s:
        return s.exec(select(Publication)).one()


# --- every remote publisher ----------------------------------------------------


def test_publishes_once_and_verifies_the_url(tmp_path, target, platform):
    ctx = ctx_for(tmp_path, target, platform)
    result = publish.fn(ctx, add_article(ctx).id)
    assert result["verified"] and result["target"] == target
    assert result["url"].startswith(platform.base_url)
    assert platform.stats()["posts"] == platform.stats()["creates"] == 1
    row = row_of(ctx)
    assert row.status == "verified" and row.url == result["url"] and row.verification == "ok"


def test_replay_with_the_same_key_posts_nothing(tmp_path, target, platform):
    ctx = ctx_for(tmp_path, target, platform)
    article = add_article(ctx)
    first = publish.fn(ctx, article.id)
    again = publish.fn(ctx, article.id)
    assert again["replayed"] and again["publication_id"] == first["publication_id"]
    assert platform.stats()["creates"] == 1
    assert [m for m, _ in platform.log].count("POST") == 1


def test_bad_credentials_are_a_config_error_without_the_secret(tmp_path, target, platform, monkeypatch, caplog):
    real = secret_env(target, platform)[SECRET_ENV[target]]
    wrong = ("0" * 24 + ":" + "ab" * 32) if target == "ghost" else "wrong-secret-value"
    monkeypatch.setenv(SECRET_ENV[target], wrong)
    ctx = ctx_for(tmp_path, target, platform)
    with pytest.raises(ConfigError, match="401") as err:
        publish.fn(ctx, add_article(ctx).id)
    text = str(err.value) + caplog.text + (row_of(ctx).verification or "")
    assert wrong not in text and real not in text and wrong.split(":")[-1] not in text
    assert row_of(ctx).status == "failed" and platform.stats()["posts"] == 0


def test_5xx_is_retried_then_succeeds_without_a_duplicate(tmp_path, target, platform):
    platform.fail_next(500, times=1)
    platform.fail_next(503, times=1)
    ctx = ctx_for(tmp_path, target, platform)
    assert publish.fn(ctx, add_article(ctx).id)["verified"]
    assert [m for m, _ in platform.log].count("POST") == 3
    assert platform.stats()["creates"] == 1


@pytest.mark.parametrize("status", [503, 500])
def test_5xx_every_time_is_a_capability_error(tmp_path, target, platform, status):
    platform.fail_next(status, times=10)
    ctx = ctx_for(tmp_path, target, platform)
    with pytest.raises(CapabilityError, match="3 attempts") as err:
        publish.fn(ctx, add_article(ctx).id)
    assert not isinstance(err.value, PublishOutcomeUnknown)  # the lookup confirmed there is no post
    assert [m for m, _ in platform.log].count("POST") == 3  # retries are bounded: 1 + 2
    assert row_of(ctx).status == "failed" and platform.stats()["posts"] == 0


def test_502_is_resent_only_where_the_platform_dedupes_by_key(tmp_path, target, platform):
    """A gateway error may hide a create still running behind it: only an Idempotency-Key makes resending safe."""
    platform.fail_next(502, times=1)
    ctx = ctx_for(tmp_path, target, platform)
    article = add_article(ctx)
    if target == "webhook":
        assert publish.fn(ctx, article.id)["verified"]
        assert [m for m, _ in platform.log].count("POST") == 2
    else:
        with pytest.raises(PublishOutcomeUnknown):
            publish.fn(ctx, article.id)
        assert [m for m, _ in platform.log].count("POST") == 1 and row_of(ctx).status == "pending"
        assert publish.fn(ctx, article.id)["verified"]  # the next attempt looks, finds nothing, posts
    assert platform.stats()["posts"] == 1


@pytest.mark.slow  # seconds of timeouts
def test_timeout_is_a_capability_error_and_the_late_post_is_adopted_not_duplicated(tmp_path, target, platform):
    platform.slow(1.0)
    ctx = ctx_for(tmp_path, target, platform, timeout_s=0.3)
    article = add_article(ctx)
    with pytest.raises(CapabilityError) as err:
        publish.fn(ctx, article.id)
    assert isinstance(err.value, PublishOutcomeUnknown)
    # The create may have landed: the row stays pending rather than claiming a failure it cannot know.
    assert row_of(ctx).status == "pending" and row_of(ctx).verification.startswith("outcome unknown")
    assert [m for m, _ in platform.log].count("POST") == 1  # a create that may still be running is never resent
    platform.slow(0)
    assert platform.wait_for_posts(1)  # the server finishes the slow create after the client gave up
    again = publish.fn(ctx, article.id)
    assert again["verified"] and again["adopted"]
    assert platform.stats()["posts"] == 1 and platform.stats()["duplicates"] == 0


def test_409_adopts_the_existing_post_found_by_key(tmp_path, target, platform):
    # An earlier attempt made the post but its answer was lost; the platform now refuses the slug.
    platform.on_taken_slug = "conflict"
    if target == "webhook":
        platform.honour_idempotency_key = False  # so the receiver's slug check is what answers
    ctx = ctx_for(tmp_path, target, platform)
    article = add_article(ctx)
    key = _key(ctx.run_id, article)
    earlier = get_publisher(ctx.settings.publish, ctx.settings.base_dir).publish(key=key, slug=_slug(article, key), title=article.title,
                                             body_markdown=article.body, content_hash=article.content_hash)
    result = publish.fn(ctx, article.id)
    assert result["verified"] and result["url"] == earlier.url
    assert [m for m, _ in platform.log].count("POST") == 2  # the earlier create, then the one refused with 409
    assert platform.stats()["posts"] == 1


def test_409_for_someone_elses_post_is_a_capability_error(tmp_path, target, platform):
    platform.on_taken_slug = "conflict"
    if target == "webhook":
        platform.honour_idempotency_key = False
    ctx = ctx_for(tmp_path, target, platform)
    pub = get_publisher(ctx.settings.publish, ctx.settings.base_dir)
    pub.publish(key="a" * 64, slug="same-slug", title="T", body_markdown="one", content_hash="1" * 64)
    with pytest.raises(CapabilityError, match="taken"):
        pub.publish(key="b" * 64, slug="same-slug", title="T", body_markdown="two", content_hash="2" * 64)
    assert platform.stats()["posts"] == 1


def test_pending_row_with_a_post_of_other_content_is_refused(tmp_path, target, platform):
    """Same key, different content on the platform: never adopted, never overwritten."""
    ctx = ctx_for(tmp_path, target, platform)
    article = add_article(ctx)
    key = _key(ctx.run_id, article)
    get_publisher(ctx.settings.publish, ctx.settings.base_dir).publish(key=key, slug=_slug(article, key), title=article.title,
                                   body_markdown="something else", content_hash="f" * 64)
    with ctx.ledger.write() as s:
        s.add(Publication(run_id=ctx.run_id, article_id=article.id, idempotency_key=key, target=target,
                          content_hash=article.content_hash))
    with pytest.raises(CapabilityError, match="content hash differs"):
        publish.fn(ctx, article.id)
    assert platform.stats()["posts"] == 1 and row_of(ctx).status == "pending"


def test_missing_secret_or_url_is_a_config_error(tmp_path, target, platform, monkeypatch):
    ctx = ctx_for(tmp_path, target, platform)
    monkeypatch.delenv(SECRET_ENV[target])
    with pytest.raises(ConfigError, match=SECRET_ENV[target]):
        get_publisher(ctx.settings.publish, ctx.settings.base_dir)
    publish = ctx.settings.publish.model_copy(deep=True)
    getattr(publish, target).url = ""
    with pytest.raises(ConfigError, match=rf"\[publish.{target}\] url"):
        get_publisher(publish, ctx.settings.base_dir)


# --- one platform at a time ----------------------------------------------------


def test_wordpress_draft_is_posted_but_not_verified(tmp_path, monkeypatch):
    server = make_platform("wordpress")
    monkeypatch.setenv(SECRET_ENV["wordpress"], server.password)
    try:
        ctx = ctx_for(tmp_path, "wordpress", server)
        ctx.settings = dataclasses.replace(ctx.settings, publish=ctx.settings.publish.model_copy(deep=True))
        ctx.settings.publish.wordpress.status = "draft"
        with pytest.raises(CapabilityError, match="404"):
            publish.fn(ctx, add_article(ctx).id)
        # Kept on the platform as the pending publication: the next attempt reuses it, never a second post.
        row = row_of(ctx)
        assert server.posts[0].status == "draft" and row.status == "pending" and "still on wordpress" in row.verification
        with pytest.raises(CapabilityError, match="404"):
            publish.fn(ctx, row.article_id)
        assert len(server.posts) == 1 and row_of(ctx).id == row.id
        # The next run of the channel: the post is still there, unverified; no second post, the run says why.
        ctx.ledger.finish_run(ctx.run_id, "incomplete", 4, "stuck")
        later = dataclasses.replace(ctx, run_id=ctx.ledger.start_run("m").id, platform_budget=None)
        with pytest.raises(PublicationFailed, match="not publishing a second post"):
            publish.fn(later, add_article(later).id)
        assert len(server.posts) == 1 and row_of(ctx).id == row.id
    finally:
        server.stop()


def test_ghost_token_is_the_documented_jwt():
    token = admin_token("kid123", bytes.fromhex("00ff" * 16), now=1_700_000_000)
    header, payload, _ = (json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) if i < 2 else p
                          for i, p in enumerate(token.split(".")))
    assert header == {"alg": "HS256", "typ": "JWT", "kid": "kid123"}
    assert payload == {"iat": 1_700_000_000, "exp": 1_700_000_300, "aud": "/admin/"}


def test_ghost_rejects_a_malformed_admin_key(tmp_path, monkeypatch):
    server = make_platform("ghost")
    try:
        monkeypatch.setenv(SECRET_ENV["ghost"], "not-a-key")
        ctx = ctx_for(tmp_path, "ghost", server)
        with pytest.raises(ConfigError, match="<id>:<hex secret>") as err:
            get_publisher(ctx.settings.publish, ctx.settings.base_dir)
        assert "not-a-key" not in str(err.value)
    finally:
        server.stop()


def test_webhook_without_lookup_finds_nothing_and_relies_on_the_key(tmp_path, monkeypatch):
    server = make_platform("webhook")
    server.lookup = False
    monkeypatch.setenv(SECRET_ENV["webhook"], server.secret)
    try:
        ctx = ctx_for(tmp_path, "webhook", server)
        pub = get_publisher(ctx.settings.publish, ctx.settings.base_dir)
        with pytest.raises(LookupUnsupported):  # its silence proves nothing: not "None, so not published"
            pub.find(key="k" * 64, slug="s")
        first = pub.publish(key="k" * 64, slug="s", title="T", body_markdown="b", content_hash="1" * 64)
        again = pub.publish(key="k" * 64, slug="s", title="T", body_markdown="b", content_hash="1" * 64)
        assert first.url == again.url and server.stats()["posts"] == 1
    finally:
        server.stop()


def test_local_find_and_atom_feed(tmp_path):
    ctx = new_context(write_config(tmp_path, "local", None))
    result = publish.fn(ctx, add_article(ctx).id)
    pub = get_publisher(ctx.settings.publish, ctx.settings.base_dir)
    row = row_of(ctx)
    found = pub.find(key=row.idempotency_key, slug="whatever-slug")
    assert found is not None and found.url == result["url"] and found.content_hash == row.content_hash
    assert pub.find(key="0" * 64, slug="x") is None
    feed = ET.parse(tmp_path / "site" / "feed.xml").getroot()
    ns = {"a": "http://www.w3.org/2005/Atom"}
    entries = feed.findall("a:entry", ns)
    assert len(entries) == 1 and entries[0].find("a:link", ns).get("href") == result["url"]
    assert datetime.fromisoformat(feed.find("a:updated", ns).text).utcoffset() is not None  # RFC 3339, with zone
    assert entries[0].find("a:content", ns).text


# --- plugins -------------------------------------------------------------------


class _FakePublisher:
    name = "fake"


def _fake_factory(publish, base_dir):
    return _FakePublisher()


def test_unknown_target_lists_the_known_ones(tmp_path):
    ctx = new_context(write_config(tmp_path, "local", None))
    with pytest.raises(ConfigError) as err:
        get_publisher(ctx.settings.publish, ctx.settings.base_dir, "myspace")
    msg = str(err.value)
    assert "\n" not in msg and "myspace" in msg and all(t in msg for t in ("ghost", "local", "webhook", "wordpress"))


def test_targets_resolve_through_entry_points_with_a_builtin_fallback(tmp_path, monkeypatch):
    ctx = new_context(write_config(tmp_path, "local", None))
    plugin = metadata.EntryPoint(name="fake", value=f"{__name__}:_fake_factory", group=publishers.GROUP)

    def entry_points(group=None, name=None):
        eps = [plugin] if group == publishers.GROUP else []
        return [ep for ep in eps if name is None or ep.name == name]

    monkeypatch.setattr(publishers.metadata, "entry_points", entry_points)
    assert isinstance(get_publisher(ctx.settings.publish, ctx.settings.base_dir, "fake"), _FakePublisher)
    assert "fake" in publishers.known_targets()
    # Stale metadata (no built-in entry points at all): the fallback map still finds them.
    assert get_publisher(ctx.settings.publish, ctx.settings.base_dir, "local").name == "local"
