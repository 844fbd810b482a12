"""The real-WordPress tier: Debian's WordPress 6.1 on PHP's built-in server and MariaDB, on 127.0.0.1.

One site serves the whole session (tests/realwp.py); permalink modes are
switched from PHP CLI, posts are deleted between tests and counted by PHP CLI
(``get_posts``, every status), so a duplicate post cannot hide. Skipped with
one line when WordPress, PHP or MariaDB is missing, unless
``PIPELINE_REQUIRE_REAL_PLATFORMS=1`` (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from collections import Counter

import httpx
import pytest
from sqlmodel import select

from pipeline.capabilities.publish import publish
from pipeline.errors import ConfigError
from pipeline.ledger.models import Article, Publication, Registration, Run
from pipeline.publishing.publish import idempotency_key as _key
from pipeline.publishing.publishers import PublishOutcomeUnknown
from pipeline.publishing.publishers.wordpress import read_markers
from pipeline.text.content import content_hash

import realwp
from platforms import SECRET_ENV, new_context
from support import KEY_ENV, REPO
from support import write_config as llm_config

pytestmark = pytest.mark.wordpress
REQUIRED = os.environ.get("PIPELINE_REQUIRE_REAL_PLATFORMS") == "1"
MISSING = realwp.missing()
if MISSING and not REQUIRED:  # one line for the whole tier, not one per test
    pytest.skip(f"real WordPress tier skipped: {MISSING}", allow_module_level=True)

TITLE = 'Builds <script>alert("x")</script> & "quotes" — 夜间构建 🚀'
BODY = """Forty minutes became **nine**. 我们的夜间构建变快了 🚀, and here is how.

- the cache key was `package-lock.json` & it changed every run
- a third of the tests slept for <script>two</script> seconds

A "quoted" line, an apostrophe's worth, and 1 < 2 > 0.
"""
WORKER_ENV = {k: v for k, v in os.environ.items() if k != "PIPELINE_FAULT"}


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    if MISSING:
        pytest.fail(f"real WordPress tier required (PIPELINE_REQUIRE_REAL_PLATFORMS=1) but {MISSING}", pytrace=False)
    wp = realwp.WordPressSite(tmp_path_factory.mktemp("wordpress"))
    try:
        wp.start()
        yield wp
    finally:
        wp.stop()


@pytest.fixture
def fresh(site):
    """The site with no posts, php -S running and the database reachable."""
    site.database_down(False)
    site.start_php()
    site.reset()
    yield site
    site.database_down(False)
    site.start_php()


@pytest.fixture(scope="module")
def worker():
    from support import CrashWorker as Worker

    w = Worker()
    yield w
    w.close()


def wp_config(tmp_path, site, user: str, **publish):
    settings = {"timeout_s": 10, "retries": 2, "backoff_s": 0.05, **publish}
    path = tmp_path / "config.toml"
    path.write_text(f"""
[ledger]
url = "sqlite:///{tmp_path}/ledger.db"

[publish]
target = "wordpress"
{chr(10).join(f"{k} = {v}" for k, v in settings.items())}

[publish.wordpress]
url = "{site.url}"
username = "{user}"
password_env = "{SECRET_ENV['wordpress']}"
""", encoding="utf-8")
    return path


def article(ctx, title: str = TITLE, body: str = BODY) -> Article:
    """A humanized article as the ledger would hold it (score above the threshold)."""
    with ctx.ledger.write() as s:
        row = Article(run_id=ctx.run_id, kind="humanized", title=title, body=body, language="en",
                      content_hash=content_hash(title, body), score=90.0)
        s.add(row)
    return row


def per_key(posts: list[dict]) -> Counter:
    return Counter(read_markers(p["content"]).get("idempotency-key") for p in posts)


def check_public_page(url: str, title: str) -> None:
    """What a reader gets: the title as text, no empty first paragraph, the body as Markdown renders it."""
    assert httpx.head(url, timeout=10).status_code == 200
    page = httpx.get(url, timeout=10).text
    shown = re.search(r'<h1[^>]*class="[^"]*wp-block-post-title[^"]*"[^>]*>(.*?)</h1>', page, re.S).group(1)
    assert "<script" not in shown.lower()
    assert html.unescape(shown).replace("“", '"').replace("”", '"') == title  # wptexturize curls the quotes
    content = re.search(r'<div[^>]*wp-block-post-content[^>]*>(.*?)</div>', page, re.S).group(1).strip()
    # The disclosure leads (pipeline.text.disclosure), its AIGC metadata in a data attribute kses keeps for every role.
    label, _, content = content.partition("</p>")
    assert label.startswith('<p class="ai-disclosure" data-aigc="') and "This article was written by an AI" in label, label
    assert '&quot;Label&quot;:&quot;1&quot;' in label or '"Label":"1"' in html.unescape(label)
    content = content.strip()
    assert content.startswith("<p>Forty minutes became <strong>nine</strong>"), content[:200]
    assert "pipeline-idempotency-key" not in page and "idempotencyKey" not in page
    assert "<li>the cache key was <code>package-lock.json</code> &amp; it changed every run</li>" in content
    assert "<script>two</script>" not in content and "&lt;script&gt;two&lt;/script&gt;" in content


@pytest.mark.parametrize("user", ["admin", "writer"])
@pytest.mark.parametrize("mode", ["plain", "date", "postname"])
def test_publish_replay_crash_and_recover(tmp_path, fresh, worker, monkeypatch, mode, user):
    fresh.permalinks(mode)
    monkeypatch.setenv(SECRET_ENV["wordpress"], fresh.passwords[user])
    config = wp_config(tmp_path, fresh, user)
    ctx = new_context(config)
    first = article(ctx)
    result = publish.fn(ctx, first.id)
    assert result["verified"], result
    link = {"plain": r"/\?p=\d+$", "date": r"/\d{4}/\d\d/\d\d/builds-script-alert-x-script-quotes-ye-jian-gou-jian-a\d+-[0-9a-f]{8}/$",
            "postname": r"/builds-script-alert-x-script-quotes-ye-jian-gou-jian-a\d+-[0-9a-f]{8}/$"}[mode]
    assert re.search(link, result["url"]), result["url"]
    check_public_page(result["url"], TITLE)

    again = publish.fn(ctx, first.id)  # replay with the same key
    assert again["replayed"] and again["url"] == result["url"]

    # Crash between the platform call and the ledger commit, then the same publish again: adopted.
    crashed = new_context(config)
    second = article(crashed, body=BODY + "\nSecond article.\n")
    reply = worker.publish(config, crashed.run_id, second.id, {SECRET_ENV["wordpress"]: fresh.passwords[user],
                                                               "PIPELINE_FAULT": "crash_after_platform_call"})
    assert reply["exit"] == 137, reply
    recovered = publish.fn(crashed, second.id)
    assert recovered["verified"] and recovered["adopted"]

    posts = fresh.posts()
    counts = per_key(posts)
    print(f"\nreal-wordpress mode={mode} user={user} posts={len(posts)} expected=2 "
          f"duplicates={sum(n - 1 for n in counts.values())}")
    assert len(posts) == 2 and set(counts) == {_key(ctx.run_id, first), _key(crashed.run_id, second)}
    assert all(p["author"] == user and p["status"] == "publish" for p in posts)


@pytest.mark.parametrize("path", ["create", "lookup"])
def test_a_wrong_application_password_is_one_line_naming_the_credentials(tmp_path, fresh, monkeypatch, path):
    fresh.permalinks("plain")
    monkeypatch.setenv(SECRET_ENV["wordpress"], "aaaa bbbb cccc dddd eeee ffff")
    ctx = new_context(wp_config(tmp_path, fresh, "admin"))
    art = article(ctx)
    if path == "lookup":  # a crashed attempt left a pending row: the lookup comes first
        with ctx.ledger.write() as s:
            s.add(Publication(run_id=ctx.run_id, article_id=art.id, idempotency_key=_key(ctx.run_id, art),
                              target="wordpress", content_hash=art.content_hash))
    with pytest.raises(ConfigError) as err:
        publish.fn(ctx, art.id)
    msg = str(err.value)
    assert "\n" not in msg and "application password" in msg and SECRET_ENV["wordpress"] in msg
    assert ("401" if path == "create" else "rest_forbidden_status") in msg
    assert "aaaa" not in msg and fresh.posts() == []


def test_a_contributor_is_told_which_roles_can_publish(tmp_path, fresh, monkeypatch):
    fresh.permalinks("plain")
    monkeypatch.setenv(SECRET_ENV["wordpress"], fresh.passwords["contrib"])
    ctx = new_context(wp_config(tmp_path, fresh, "contrib"))
    with pytest.raises(ConfigError, match=r"answered 403 .*'contrib' may not publish posts; give it the author") as err:
        publish.fn(ctx, article(ctx).id)
    assert "\n" not in str(err.value) and fresh.posts() == []


def test_database_down_is_reported_as_the_500_it_is(tmp_path, fresh, monkeypatch):
    fresh.permalinks("date")
    monkeypatch.setenv(SECRET_ENV["wordpress"], fresh.passwords["admin"])
    ctx = new_context(wp_config(tmp_path, fresh, "admin"))
    art = article(ctx)
    fresh.database_down()
    with pytest.raises(PublishOutcomeUnknown) as err:
        publish.fn(ctx, art.id)
    msg = str(err.value)
    assert "no answer" not in msg and "answered 500 (Error establishing a database connection)" in msg
    fresh.database_down(False)
    assert publish.fn(ctx, art.id)["verified"]  # the pending row: looked up, not found, posted once
    assert len(fresh.posts()) == 1


def _cli_run(config, env: dict, fault: str | None = None) -> tuple[subprocess.CompletedProcess, float]:
    env = {**WORKER_ENV, KEY_ENV: "sk-test-not-a-real-key", **env}
    if fault:
        env["PIPELINE_FAULT"] = fault
    started = time.monotonic()
    entry = [str(REPO / "tests" / "faults.py")] if fault else ["-m", "pipeline"]  # faults.py arms PIPELINE_FAULT
    proc = subprocess.run([sys.executable, *entry, "run", "--config", str(config)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    return proc, time.monotonic() - started


def _run_config(tmp_path, site, fake_llm, user="admin", extra=""):
    return llm_config(tmp_path, fake_llm.api_base, "honest", f"""
[publish]
target = "wordpress"
timeout_s = 10
backoff_s = 0.05

[publish.wordpress]
url = "{site.url}"
username = "{user}"
password_env = "{SECRET_ENV['wordpress']}"
{extra}""")


def test_pipeline_run_end_to_end_then_a_crashed_run_and_the_next_run(tmp_path, fresh, fake_llm):
    fresh.permalinks("postname")
    config = _run_config(tmp_path, fresh, fake_llm)
    env = {SECRET_ENV["wordpress"]: fresh.passwords["admin"]}
    proc, _ = _cli_run(config, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(fresh.posts()) == 1

    proc, _ = _cli_run(config, env, fault="crash_after_platform_call")  # killed after WordPress made the post
    assert proc.returncode == 137, proc.stdout + proc.stderr
    assert len(fresh.posts()) == 2
    proc, _ = _cli_run(config, env)  # the next run: marks it crashed, recovers, registers it, then its own run
    assert proc.returncode == 0, proc.stdout + proc.stderr

    from pipeline.ledger.writer import Ledger

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    with ledger.read() as s:
        runs = s.exec(select(Run).order_by(Run.started_at)).all()
        pubs = s.exec(select(Publication).order_by(Publication.id)).all()
        regs = {r.publication_id: r.registration_no for r in s.exec(select(Registration)).all()}
    assert [r.status for r in runs] == ["done", "crashed", "done"]
    assert [p.status for p in pubs] == ["verified"] * 3 and set(regs) == {p.id for p in pubs}
    assert pubs[1].verification.startswith("recovered after crash")
    posts = fresh.posts()
    assert len(posts) == 3 and sum(n - 1 for n in per_key(posts).values()) == 0
    status = subprocess.run([sys.executable, "-m", "pipeline", "status", "--config", str(config)], cwd=REPO,
                            env={**WORKER_ENV, KEY_ENV: "x"}, capture_output=True, text=True, timeout=60)
    assert f"registered as {regs[pubs[1].id]}" in status.stdout, status.stdout


def test_php_server_stopped_ends_the_run_fast_with_exit_6(tmp_path, fresh, fake_llm):
    """Default budget and timeouts: a refused connection ends the run at once, not after max_turns."""
    fresh.permalinks("plain")
    config = _run_config(tmp_path, fresh, fake_llm)
    fresh.stop_php()
    proc, took = _cli_run(config, {SECRET_ENV["wordpress"]: fresh.passwords["admin"]})
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "platform unavailable" in proc.stderr
    from pipeline.ledger.writer import Ledger

    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.db")
    run = ledger.runs(1)[0]
    first = next(e for e in ledger.executions(run.id) if e.capability == "publish")
    since_first = (run.finished_at - first.started_at).total_seconds()
    print(f"\nphp stopped: run ended {since_first:.1f}s after its first publish (whole run {took:.1f}s), exit 6")
    assert since_first < 5
