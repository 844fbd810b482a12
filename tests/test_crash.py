"""Crash safety: a process killed between the platform call and the ledger update never causes a duplicate.

Each iteration publishes one article in a child process armed with
``PIPELINE_FAULT=crash_after_platform_call``: the platform gets the post and
the process dies (exit 137) before the ledger hears of it. The same publish
is then run again without the fault (same run, same article, so the same
idempotency key) and must adopt the post instead of making a second one.
After the loop the platform and the ledger are audited against each other.

Every platform renames a taken slug (as WordPress and Ghost do) and the
webhook receiver ignores ``Idempotency-Key``, so only the pipeline's own
``find``-before-publish can prevent a duplicate.
``PIPELINE_CRASH_ITERATIONS`` raises the iteration count for a soak run.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from pipeline import config as config_mod
from pipeline.capabilities.publish import publish
from pipeline.ledger.models import Publication, Run
from pipeline.ledger.utc import utcnow
from pipeline.publishing.publish import RECOVERED
from pipeline.publishing.publish import idempotency_key as _key
from pipeline.publishing.settle import recover_pending

from platforms import add_article, make_platform, new_context, secret_env, write_config
from support import CrashWorker, Recorder

pytestmark = pytest.mark.slow  # each publish runs in a forked worker process

ITERATIONS = max(20, int(os.environ.get("PIPELINE_CRASH_ITERATIONS", "20")))
FAULT = {"PIPELINE_FAULT": "crash_after_platform_call"}


@pytest.fixture(scope="module")
def worker():
    w = CrashWorker()
    yield w
    w.close()


@pytest.fixture
def platform_for(monkeypatch):
    started = []

    def start(target: str):
        server = make_platform(target)
        if server is not None:
            started.append(server)
            # Neither the receiver's key check nor a slug conflict may save us: only find-before-publish.
            server.on_taken_slug = "rename"
            if target == "webhook":
                server.honour_idempotency_key = False
        for name, value in secret_env(target, server).items():
            monkeypatch.setenv(name, value)
        return server

    yield start
    for server in started:
        server.stop()


def platform_posts(target: str, server, site: Path) -> list[tuple[str | None, str]]:
    """(idempotency key, url) of every post the platform holds."""
    if server is not None:
        return [(p.key, p.url) for p in server.posts]
    posts = []  # the local site's records (.pipeline/posts/<slug>.json) say which key each page carries
    for page in sorted((site / "posts").glob("*.html")):
        if page.name == "index.html":
            continue
        record = site / ".pipeline" / "posts" / f"{page.stem}.json"
        key = json.loads(record.read_text(encoding="utf-8"))["key"] if record.exists() else None
        posts.append((key, f"http://127.0.0.1:8765/posts/{page.name}"))
    return posts


def audit(target: str, server, ctx) -> dict[str, int]:
    """Platform vs ledger: duplicates, platform posts the ledger lacks, ledger rows the platform lacks."""
    posts = platform_posts(target, server, Path(ctx.settings.publish.local.dir))
    with ctx.ledger.read() as s:
        rows = s.exec(select(Publication)).all()
    verified = {(r.idempotency_key, r.url) for r in rows if r.status == "verified"}
    keys = [k for k, _ in posts]
    return {
        "posts": len(posts),
        "duplicates": len(keys) - len(set(keys)),
        "missing": sum(1 for post in posts if post not in verified),
        "phantoms": sum(1 for v in verified if v not in set(posts)),
        "not_verified": sum(1 for r in rows if r.status != "verified"),
    }


@pytest.mark.parametrize("target", ["local", "webhook", "wordpress", "ghost"])
def test_crash_after_the_platform_call_never_duplicates(tmp_path, target, worker, platform_for, capsys):
    server = platform_for(target)
    config = write_config(tmp_path, target, server)
    crashes = adopted = 0
    for i in range(ITERATIONS):
        ctx = new_context(config)
        article = add_article(ctx, f"\nIteration {i}.")
        reply = worker.publish(config, ctx.run_id, article.id, {**secret_env(target, server), **FAULT})
        assert reply["exit"] == 137, reply
        crashes += 1
        with ctx.ledger.read() as s:
            row = s.exec(select(Publication).where(Publication.run_id == ctx.run_id)).one()
        assert row.status == "pending" and row.url is None  # the ledger never heard back
        result = publish.fn(ctx, article.id)  # same run and article: same key
        assert result["verified"], result
        adopted += bool(result.get("adopted"))
        ctx.ledger.close()
    figures = audit(target, server, new_context(config))
    creates = server.stats()["creates"] if server else figures["posts"]
    with capsys.disabled():
        print(f"\ncrash-test target={target} iterations={ITERATIONS} crashes={crashes} adopted={adopted} "
              f"posts={figures['posts']} creates={creates} duplicates={figures['duplicates']} "
              f"missing={figures['missing']} phantoms={figures['phantoms']}")
    assert crashes == adopted == ITERATIONS
    assert figures == {"posts": ITERATIONS, "duplicates": 0, "missing": 0, "phantoms": 0, "not_verified": 0}
    assert creates == ITERATIONS


def _crash(worker, config, target, server, suffix: str):
    """A run whose publish died after the platform call: (ctx, article)."""
    ctx = new_context(config)
    article = add_article(ctx, suffix)
    assert worker.publish(config, ctx.run_id, article.id, {**secret_env(target, server), **FAULT})["exit"] == 137
    return ctx, article


def _status(ctx) -> tuple[str, str | None]:
    with ctx.ledger.read() as s:
        row = s.exec(select(Publication).where(Publication.run_id == ctx.run_id)).one()
    return row.status, row.verification


@pytest.mark.parametrize("target", ["local", "webhook"])
def test_recover_pending_settles_what_dead_runs_left(tmp_path, target, worker, platform_for):
    server = platform_for(target)
    config = write_config(tmp_path, target, server)

    finished, _ = _crash(worker, config, target, server, "\nA.")  # the run was later marked interrupted
    finished.ledger.finish_run(finished.run_id, "interrupted", 137, "killed")
    stale, _ = _crash(worker, config, target, server, "\nB.")  # still "running", but started two hours ago
    with stale.ledger.write() as s:
        run = s.get(Run, stale.run_id)
        run.started_at = utcnow() - timedelta(hours=2)
        s.add(run)
    live, _ = _crash(worker, config, target, server, "\nC.")  # still running, recently: not ours to touch
    never = new_context(config)  # died after claiming the key, before the platform call
    art = add_article(never, "\nD.")
    with never.ledger.write() as s:
        s.add(Publication(run_id=never.run_id, article_id=art.id, idempotency_key=_key(never.run_id, art),
                          target=target, content_hash=art.content_hash))
    never.ledger.finish_run(never.run_id, "error", 1, "crashed")
    unknown_target = new_context(config)  # a target this config cannot reach: left pending, no exception
    art = add_article(unknown_target, "\nE.")
    with unknown_target.ledger.write() as s:
        s.add(Publication(run_id=unknown_target.run_id, article_id=art.id, idempotency_key="e" * 64,
                          target="myspace", content_hash=art.content_hash))
    unknown_target.ledger.finish_run(unknown_target.run_id, "error", 1, "crashed")

    assert recover_pending(finished.settings, finished.ledger, channel="another-channel") == 0
    assert recover_pending(finished.settings, finished.ledger) == 3
    assert _status(finished) == ("verified", RECOVERED)
    assert _status(stale) == ("verified", RECOVERED)
    assert _status(live)[0] == "pending"
    assert _status(never)[0] == "failed" and _status(never)[1].startswith(RECOVERED)
    assert _status(unknown_target)[0] == "pending"
    assert recover_pending(finished.settings, finished.ledger) == 0  # nothing left that it may settle
    assert recover_pending(finished.settings, finished.ledger, older_than_min=0) == 1
    assert _status(live) == ("verified", RECOVERED)

    # The recovered publication is the run's publication: publishing again is a replay, not a post.
    again = publish.fn(finished, _article_of(finished))
    assert again["replayed"] and again["verified"]
    figures = audit(target, server, finished)
    assert figures["posts"] == 3 and figures["duplicates"] == 0 and figures["missing"] == 0


def _article_of(ctx) -> int:
    with ctx.ledger.read() as s:
        return s.exec(select(Publication).where(Publication.run_id == ctx.run_id)).one().article_id


# --- reconciliation: what crashed and interrupted runs left unregistered (issue 9 item 7, issue 14 item 5) ---


def _registrations(ctx) -> list[tuple[int, str, str]]:
    from pipeline.ledger.models import Registration

    with ctx.ledger.read() as s:
        return [(r.publication_id, r.run_id, r.registration_no) for r in s.exec(select(Registration)).all()]


def _recorder():
    return Recorder()


@pytest.mark.parametrize("ending", ["crashed", "interrupted", "provider_unavailable", "timed_out", "hallucination"])
def test_reconciliation_registers_what_an_unfinished_run_published_exactly_once(tmp_path, worker, platform_for, ending):
    """Crashed (kill -9 after the platform call), interrupted (SIGTERM after publish, before register), or ended
    after publish by its provider, a deadline or the model: the post is live, the ledger row verified or pending,
    the register incomplete. The next run completes it, once."""
    from pipeline.publishing.settle import reconciliations
    from pipeline.views.reports import daily_summary, render_daily
    from pipeline.views.status import channel_status

    server = platform_for("wordpress")
    rec = _recorder()
    try:
        config = write_config(tmp_path, "wordpress", server, extra=f'\n[alerts]\nwebhook_url = "{rec.base}/hook"\n')
        if ending == "crashed":
            dead, _ = _crash(worker, config, "wordpress", server, "\nA.")  # pending, post on the platform
        else:
            dead = new_context(config)
            assert publish.fn(dead, add_article(dead, "\nA.").id)["verified"]
        dead.ledger.finish_run(dead.run_id, ending, 130 if ending == "interrupted" else None, "stopped")
        assert _registrations(dead) == []

        # The next run reconciles first: the registration, then one alert.
        nxt = new_context(config)
        reply = worker.publish(config, nxt.run_id, None, secret_env("wordpress", server), call="reconcile")
        assert reply["exit"] == 0 and len(reply["result"]) == 1
        assert len(rec.hits) == 1
        [(_pub_id, run_id, number)] = _registrations(dead)
        assert run_id == dead.run_id and number.startswith("CT-")
        text = rec.hits[0][1]["text"]
        assert dead.run_id in text and number in text and "reconciled" in text and ending in text

        # Nothing twice: another reconciliation registers nothing and alerts nothing.
        again = new_context(config)
        assert worker.publish(config, again.run_id, None, secret_env("wordpress", server), call="reconcile")["result"] == []
        assert len(_registrations(dead)) == 1 and len(rec.hits) == 1
        assert server.stats()["posts"] == 1 and server.stats()["duplicates"] == 0

        # The dead run's facts now include the registration, recorded as done by reconciliation.
        [fact] = [f for f in dead.ledger.facts(dead.run_id) if f.capability == "register"]
        assert fact.value == number and fact.result["reconciled_by"] == nxt.run_id

        # Status and the daily report show it.
        [row] = channel_status(config_mod.load(config, environ={}))
        assert [r.registration_no for r in row.reconciled_today] == [number] and row.awaiting_registration == []
        summary = daily_summary(dead.ledger, utcnow().date(), "UTC")
        assert [r.registration_no for r in summary.reconciled] == [number]
        assert f"registered as {number} by run {nxt.run_id}" in render_daily(summary)
        assert len(reconciliations(dead.ledger)) == 1
    finally:
        rec.server.shutdown()


def test_reconciliation_killed_between_its_commit_and_its_alert_alerts_on_the_next_run(tmp_path, worker, platform_for):
    server = platform_for("wordpress")
    rec = _recorder()
    try:
        config = write_config(tmp_path, "wordpress", server, extra=f'\n[alerts]\nwebhook_url = "{rec.base}/hook"\n')
        dead = new_context(config)
        assert publish.fn(dead, add_article(dead, "\nB.").id)["verified"]
        dead.ledger.finish_run(dead.run_id, "interrupted", 130, "SIGTERM")
        nxt = new_context(config)
        armed = {**secret_env("wordpress", server), "PIPELINE_FAULT": "crash_after_reconcile_commit"}
        assert worker.publish(config, nxt.run_id, None, armed, call="reconcile")["exit"] == 137
        [(_, _, number)] = _registrations(dead)  # committed before the kill
        assert rec.hits == []  # the alert never went out
        from pipeline.views.status import channel_status

        [row] = channel_status(config_mod.load(config, environ={}))
        assert row.reconciled_today[0].registration_no == number
        after = new_context(config)
        assert worker.publish(config, after.run_id, None, secret_env("wordpress", server), call="reconcile")["result"] == []
        assert len(_registrations(dead)) == 1  # not registered twice
        assert len(rec.hits) == 1 and number in rec.hits[0][1]["text"]  # the lost alert, sent now
        assert worker.publish(config, after.run_id, None, secret_env("wordpress", server), call="reconcile")["result"] == []
        assert len(rec.hits) == 1
    finally:
        rec.server.shutdown()


@pytest.mark.parametrize("ending", ["crashed", "incomplete"])
def test_awaiting_registration_is_shown_until_a_run_reconciles(tmp_path, platform_for, ending):
    from pipeline.views.reports import daily_summary, render_daily
    from pipeline.views.status import channel_status

    server = platform_for("wordpress")
    config = write_config(tmp_path, "wordpress", server)
    dead = new_context(config)
    result = publish.fn(dead, add_article(dead, "\nC.").id)
    dead.ledger.finish_run(dead.run_id, ending, None, "killed")
    [row] = channel_status(config_mod.load(config, environ={}))
    assert [r.url for r in row.awaiting_registration] == [result["url"]]
    text = render_daily(daily_summary(dead.ledger, utcnow().date(), "UTC"))
    assert "## Awaiting registration" in text and result["url"] in text


def test_a_crashed_webhook_post_without_a_lookup_is_unknown_not_unpublished(tmp_path, worker, platform_for):
    """Issue 14, 6b: no lookup means the ledger cannot know; it must say so and alert, not claim "never published"."""
    server = platform_for("webhook")
    server.lookup = False
    config = write_config(tmp_path, "webhook", server)
    ctx, _ = _crash(worker, config, "webhook", server, "\nNo lookup.")
    ctx.ledger.finish_run(ctx.run_id, "crashed", 137, "killed")
    alerts = []
    assert recover_pending(ctx.settings, ctx.ledger, on_unknown=lambda pub, detail: alerts.append((pub.id, detail))) == 1
    status, why = _status(ctx)
    assert status == "unknown" and "never published" not in why and "offers no lookup" in why
    assert len(alerts) == 1 and "cannot be known" in alerts[0][1]
    assert server.stats()["posts"] == 1  # the receiver does hold it: "failed" would have been false
