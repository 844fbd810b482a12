"""The wechat publisher against the contract fake: the publish state machine, tokens, error codes, content."""

from __future__ import annotations

import logging
import threading

import pytest
from sqlmodel import select

from pipeline.capabilities.publish import publish
from pipeline.errors import (
    ConfigError,
    PlatformUnavailableError,
    PublicationFailed,
    PublicationSubmitted,
)
from pipeline.ledger.models import PlatformToken, Publication
from pipeline.publishing.publishers import PublishOutcomeUnknown
from pipeline.publishing.publishers.wechat import STATUS, article_html, cover_png
from pipeline.publishing.settle import recheck_published, recover_pending
from pipeline.tools.catalog import lexicons
from pipeline.tools.claims import ClaimRules

from platforms import add_article, new_context, write_config
from wechatfake import SECRET, SECRET_ENV, WeChat, wechat_config


@pytest.fixture
def wechat(monkeypatch):
    server = WeChat().start()
    monkeypatch.setenv(SECRET_ENV, SECRET)
    yield server
    server.stop()


def config(tmp_path, server, **kw):
    return write_config(tmp_path, "wechat", None, extra=wechat_config(server.base_url, **kw))


def row_of(ctx) -> Publication:
    with ctx.ledger.read() as s:
        return s.exec(select(Publication).where(Publication.run_id == ctx.run_id)).one()


def test_publish_goes_pending_submitted_verified(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat))
    article = add_article(ctx, "\n\nSee [the docs](https://example.com/docs).\n\n<script>alert(1)</script>")
    result = publish.fn(ctx, article.id)
    row = row_of(ctx)
    assert result["verified"] and result["url"] == row.url and row.url.startswith(wechat.base_url + "/s/")
    assert row.status == "verified" and row.publish_id and row.draft_id and row.cover_id and row.remote_id
    [task] = wechat.tasks.values()
    body = task.article["content"]
    assert "<script" not in body and "example.com/docs" in body and 'href="https://example.com' not in body
    assert task.article["thumb_media_id"] == row.cover_id
    assert wechat.stats()["submits"] == 1
    # Publishing again is a replay: no second task on a platform without idempotency keys.
    assert publish.fn(ctx, article.id)["replayed"]
    assert wechat.stats()["submits"] == 1


@pytest.mark.parametrize("status", [2, 3, 4])
def test_a_failed_publish_status_ends_the_run_and_is_recorded(tmp_path, wechat, status):
    wechat.outcome = status
    ctx = new_context(config(tmp_path, wechat))
    article = add_article(ctx)
    with pytest.raises(PublicationFailed, match=f"publish_status {status}"):
        publish.fn(ctx, article.id)
    row = row_of(ctx)
    assert row.status == "failed" and STATUS[status] in row.verification
    with pytest.raises(PublicationFailed):  # final: the model calling again does not resubmit
        publish.fn(ctx, article.id)
    assert wechat.stats()["submits"] == 1


def test_slow_publishing_ends_submitted_and_the_next_run_finishes_it(tmp_path, wechat):
    wechat.hold = True  # publish_status 1 until released
    ctx = new_context(config(tmp_path, wechat, poll_budget_s=0.05))
    article = add_article(ctx)
    with pytest.raises(PublicationSubmitted, match="已提交发布"):
        publish.fn(ctx, article.id)
    assert row_of(ctx).status == "submitted"
    ctx.ledger.finish_run(ctx.run_id, "submitted", 9, "still publishing")
    assert recover_pending(ctx.settings, ctx.ledger) == 0  # still publishing: left submitted, not resubmitted
    assert row_of(ctx).status == "submitted"
    wechat.release()
    assert recover_pending(ctx.settings, ctx.ledger) == 1
    row = row_of(ctx)
    assert row.status == "verified" and row.url
    assert wechat.stats()["submits"] == 1


@pytest.mark.slow  # seconds of platform waits
@pytest.mark.parametrize("removed", [5, 6])
def test_an_article_removed_after_success_is_not_a_publication(tmp_path, wechat, removed):
    ctx = new_context(config(tmp_path, wechat))
    publish.fn(ctx, add_article(ctx).id)
    row = row_of(ctx)
    wechat.remove(row.remote_id, removed)  # the status flips from 0 to 5 (or 6) later
    assert [p.id for p in recheck_published(ctx.settings, ctx.ledger)] == [row.id]
    assert row_of(ctx).status == "removed" and STATUS[removed] in row_of(ctx).verification
    assert recheck_published(ctx.settings, ctx.ledger) == []  # removed is final: not asked again
    # Removed before the pipeline ever saw it published: the poll reports 5/6 and the row fails.
    wechat.hold = True
    other = new_context(ctx.settings.base_dir / "config.toml")
    with pytest.raises(PublicationSubmitted):
        publish.fn(other, add_article(other, "\nOther.").id)
    wechat.release()
    wechat.articles()  # the task finishes (status 0) unseen, then is taken down
    wechat.remove(f"ART{row_of(other).publish_id}", removed)
    other.ledger.finish_run(other.run_id, "submitted", 9, "")
    recover_pending(other.settings, other.ledger)
    assert row_of(other).status == "failed" and f"publish_status {removed}" in row_of(other).verification


def test_a_token_expiring_mid_run_is_refreshed_once(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat))
    publish.fn(ctx, add_article(ctx).id)
    assert wechat.stats()["token_calls"] == 1
    wechat.expire_token()  # the platform expires it before our cached expiry says so
    second = new_context(ctx.settings.base_dir / "config.toml")
    assert publish.fn(second, add_article(second, "\nTwo.").id)["verified"]
    stats = wechat.stats()
    assert stats["errors"].get(42001) == 1 and stats["token_calls"] == 2 and stats["forced_refreshes"] == 0
    with ctx.ledger.read() as s:
        [cached] = s.exec(select(PlatformToken)).all()
    assert cached.token == wechat.token.value


@pytest.mark.slow  # seconds of platform waits
def test_a_token_expiring_in_the_middle_of_one_publish(tmp_path, wechat):
    """The token dies between the cover upload and draft/add: refreshed once, the publish carries on."""
    wechat.expire_after = {"material/add_material"}
    ctx = new_context(config(tmp_path, wechat))
    assert publish.fn(ctx, add_article(ctx).id)["verified"]
    stats = wechat.stats()
    assert stats["errors"].get(42001) == 1 and stats["token_calls"] == 2 and stats["submits"] == 1
    assert stats["forced_refreshes"] == 0 and wechat.counters.drafts == 1 and wechat.counters.materials == 1


def test_a_token_superseded_elsewhere_answers_40001_and_is_replaced(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat))
    publish.fn(ctx, add_article(ctx).id)
    with wechat.lock:  # another tool forced a refresh: our cached token is no longer the latest
        wechat.old_tokens.add(wechat.token.value)
        wechat.token.value = "rotated-elsewhere"
    second = new_context(ctx.settings.base_dir / "config.toml")
    assert publish.fn(second, add_article(second, "\nTwo.").id)["verified"]
    assert wechat.stats()["errors"].get(40001) == 1


def test_two_workers_share_one_token(tmp_path, wechat):
    path = config(tmp_path, wechat)
    ctxs = [new_context(path) for _ in range(2)]
    articles = [add_article(c, f"\nWorker {i}.") for i, c in enumerate(ctxs)]
    results, errors = [], []

    def work(i):
        try:
            results.append(publish.fn(ctxs[i], articles[i].id))
        except Exception as exc:  # collected: a thread's exception would otherwise vanish
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(r["verified"] for r in results)
    third = new_context(path)  # a later process: the cached token, no stable_token call
    calls = wechat.stats()["token_calls"]
    publish.fn(third, add_article(third, "\nThird.").id)
    stats = wechat.stats()
    assert stats["tokens_issued"] == 1 and stats["forced_refreshes"] == 0 and stats["token_calls"] == calls
    assert set(wechat.tokens_seen) == {wechat.token.value}


@pytest.mark.parametrize("knob, code, pattern", [
    ("secret", 40125, "AppSecret is invalid"),
    ("ip", 40164, "IP allowlist"),
])
def test_credential_errors_are_the_operators(tmp_path, wechat, monkeypatch, knob, code, pattern):
    if knob == "secret":
        monkeypatch.setenv(SECRET_ENV, "wrong-secret")
    else:
        wechat.ip_allowed = False
    ctx = new_context(config(tmp_path, wechat))
    with pytest.raises(ConfigError, match=pattern) as err:
        publish.fn(ctx, add_article(ctx).id)
    assert SECRET not in str(err.value) and "wrong-secret" not in str(err.value)
    assert wechat.stats()["errors"].get(code) == 1 and wechat.stats()["submits"] == 0


def test_the_daily_quota_ends_the_run_as_platform_unavailable(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat))
    publish.fn(ctx, add_article(ctx).id)  # warm the token
    wechat.quota_spent = True
    second = new_context(ctx.settings.base_dir / "config.toml")
    with pytest.raises(PlatformUnavailableError, match="45009"):
        publish.fn(second, add_article(second, "\nTwo.").id)
    assert row_of(second).status == "pending" and row_of(second).submit_started_at is None


def test_system_busy_is_retried(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat))
    wechat.busy_next(2)
    assert publish.fn(ctx, add_article(ctx).id)["verified"]
    assert wechat.stats()["errors"].get(-1) == 2


def test_the_token_is_never_logged_nor_written_outside_its_table(tmp_path, wechat, caplog):
    caplog.set_level(logging.DEBUG)
    ctx = new_context(config(tmp_path, wechat))
    wechat.quota_spent = False
    publish.fn(ctx, add_article(ctx).id)
    wechat.expire_token()
    wechat.quota_spent = True
    second = new_context(ctx.settings.base_dir / "config.toml")
    with pytest.raises(PlatformUnavailableError) as err:
        publish.fn(second, add_article(second, "\nTwo.").id)
    tokens = set(wechat.tokens_seen)
    texts = [caplog.text, str(err.value)]
    with ctx.ledger.read() as s:
        texts += [p.verification or "" for p in s.exec(select(Publication)).all()]
    assert tokens and not any(t in text for t in tokens for text in texts)
    assert not any(SECRET in text for text in texts)


def test_a_lost_submit_is_looked_up_not_resubmitted_while_publishing(tmp_path, wechat):
    """The submit reached the platform, its answer was lost: batchget finds the article once it is published."""
    wechat.hold = True
    path = write_config(tmp_path, "wechat", None, timeout_s=0.3, extra=wechat_config(wechat.base_url))
    ctx = new_context(path)
    article = add_article(ctx)
    wechat.late["freepublish/submit"] = 1.0
    with pytest.raises(PublishOutcomeUnknown, match="no answer to freepublish/submit"):
        publish.fn(ctx, article.id)
    assert wechat.stats()["submits"] == 1 and row_of(ctx).publish_id is None
    assert row_of(ctx).submit_started_at is not None
    with pytest.raises(PublicationSubmitted, match="outcome is unknown"):
        publish.fn(ctx, article.id)  # not in batchget yet (still publishing): wait, do not submit again
    assert wechat.stats()["submits"] == 1
    wechat.release()
    assert publish.fn(ctx, article.id)["verified"]
    assert wechat.stats()["submits"] == 1 and row_of(ctx).verification.startswith("recovered after crash")


def test_after_the_wait_a_lost_submit_that_never_published_is_submitted_again(tmp_path, wechat):
    wechat.outcome = 3  # the lost task failed: it never appears among the published articles
    ctx = new_context(config(tmp_path, wechat, resubmit_after_min=0))
    article = add_article(ctx)
    with pytest.raises(PublicationFailed):
        publish.fn(ctx, article.id)
    with ctx.ledger.write() as s:  # as a crash between submit and recording its publish_id leaves it
        row = s.exec(select(Publication)).one()
        row.status, row.publish_id, row.submitted_at, row.verification = "pending", None, None, "submitting"
        s.add(row)
    wechat.outcome = 0
    assert publish.fn(ctx, article.id)["verified"]
    assert wechat.stats()["submits"] == 2 and len(wechat.articles()) == 1


def test_the_body_is_the_html_the_platform_accepts(tmp_path):
    (tmp_path / "chart.png").write_bytes(cover_png("x", 4, 4))
    uploaded = []

    def upload(src):
        uploaded.append(src)
        return "http://mmbiz.qpic.cn/x/0" if src == "chart.png" else None

    out = article_html("Intro [链接](https://example.com/a) and [ours](https://mp.weixin.qq.com/s/abc).\n\n"
                       "![chart](chart.png) ![remote](https://example.com/r.png)\n\n"
                       '<script>steal()</script><p onclick="x()">hi</p><iframe src="https://e.com"></iframe>',
                       upload)
    # Raw HTML in the Markdown is shown as text, never as markup.
    assert "<script" not in out and "<iframe" not in out and "<p onclick" not in out and "&lt;script&gt;" in out
    assert '<a href="https://mp.weixin.qq.com/s/abc">ours</a>' in out
    assert "链接 (https://example.com/a)" in out and 'href="https://example.com' not in out
    assert '<img src="http://mmbiz.qpic.cn/x/0" alt="chart">' in out and "remote" in out
    assert uploaded == ["chart.png", "https://example.com/r.png"]
    assert cover_png("seed").startswith(b"\x89PNG")


def test_the_sanitizer_drops_markup_the_platform_refuses():
    from pipeline.publishing.publishers.wechat import _Sanitizer

    parser = _Sanitizer(lambda src: None)
    parser.feed('<p onclick="x()" style="color:red">hi <script>steal()</script><a href="javascript:x()">j</a>'
                '<iframe src="https://e.com">in</iframe><b>b</b></p>')
    out = "".join(parser.out)
    assert out == "<p>hi j<b>b</b></p>"


def test_the_guard_speaks_the_platforms_language():
    rules = ClaimRules(lexicons())
    for text in ("文章已提交发布，等待平台处理。", "发布任务已创建。", "已将文章提交发布。", "已创建发布任务。",
                 "I submitted the article for publication.", "The publish task was created."):
        assert not [c for c in rules.extract(text) if c.capability == "publish"], text
    # With the row only submitted, publish is no fact: "已发布" is unbacked, and so flagged.
    claims = rules.check("文章已提交发布，已发布。", {"draft": [1]})
    assert [(c.capability, c.status) for c in claims if c.capability == "publish"] == [("publish", "unbacked")]


def test_a_run_ends_submitted_exit_9_and_the_next_run_registers_it(harness, wechat, monkeypatch):
    """Business state ends the run: a task still publishing is exit 9, and the next run finishes it."""
    from pipeline.ledger.models import Registration, Run

    monkeypatch.setenv(SECRET_ENV, SECRET)
    extra = '[publish]\ntarget = "wechat"\n' + wechat_config(wechat.base_url, poll_budget_s=0.05)
    wechat.hold = True
    first, ledger = harness.run("honest", extra)
    assert (first.status, first.exit_code) == ("submitted", 9) and "已提交发布" in first.error
    with ledger.read() as s:
        assert s.exec(select(Publication)).one().status == "submitted"
        assert not s.exec(select(Registration)).all()
    wechat.release()
    second, ledger = harness.run("honest", extra)
    assert (second.status, second.exit_code) == ("done", 0)
    with ledger.read() as s:
        pubs = s.exec(select(Publication).order_by(Publication.id)).all()
        regs = {r.publication_id: r for r in s.exec(select(Registration)).all()}
        assert s.get(Run, first.run_id).status == "submitted"
    assert [p.status for p in pubs] == ["verified", "verified"]
    assert set(regs) == {pubs[0].id, pubs[1].id}  # the first run's article registered by the second run
    assert wechat.stats()["submits"] == 2


def test_a_lost_submit_whose_article_was_deleted_meanwhile_is_failed_not_resubmitted(tmp_path, wechat):
    ctx = new_context(config(tmp_path, wechat, resubmit_after_min=0))
    article = add_article(ctx)
    publish.fn(ctx, article.id)
    row = row_of(ctx)
    wechat.remove(row.remote_id, 5)
    with ctx.ledger.write() as s:  # as a crash between submit and recording its publish_id leaves it
        lost = s.exec(select(Publication)).one()
        lost.status, lost.publish_id, lost.url, lost.verification = "pending", None, None, "submitting"
        s.add(lost)
    with pytest.raises(PublicationFailed, match="deleted"):
        publish.fn(ctx, article.id)
    assert row_of(ctx).status == "failed" and wechat.stats()["submits"] == 1
