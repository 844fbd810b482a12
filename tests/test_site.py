"""The local site: pages worth reading, a real feed, no source listing, and safe concurrent publishing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipeline.publishing.publishers.local import LocalSitePublisher

from services import missing
from sitebrowser import HOSTILE_TITLE, build_demo_site, chromium, dump_dom, serving

ATOM = {"a": "http://www.w3.org/2005/Atom"}
REPO = Path(__file__).resolve().parent.parent


def publish_n(site: LocalSitePublisher, prefix: str, n: int, errors: list) -> None:
    for i in range(n):
        try:
            site.publish(key=f"{prefix}{i}".ljust(64, "0"), slug=f"{prefix}-{i}", title=f"Post {prefix} {i}",
                         body_markdown=f"Body of {prefix} {i}.", content_hash=f"{i:064x}")
        except Exception as exc:  # counted, not raised: the figure is the number of errors
            errors.append(f"{type(exc).__name__}: {exc}")


def test_pages_have_a_theme_dates_tags_navigation_and_no_internals(tmp_path):
    site = build_demo_site(tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    post = (tmp_path / "site" / "posts" / "zh-review.html").read_text(encoding="utf-8")
    for page in (index, post):
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
        assert 'rel="stylesheet"' in page and re.search(r'<a class="feed" href="[./]*feed.xml"', page)
        assert "pipeline-idempotency-key" not in page and "pipeline-content-hash" not in page
        assert "<script>" not in page and "&lt;script&gt;" in index
    assert '<html lang="zh">' in post and 'datetime="2026-11-21T09:00:00+00:00"' in post
    assert "Pipeline Editors" in post and '<span class="tag">编辑</span>' in post
    # prev/next: the middle post links to both neighbours.
    assert 'href="hostile-title.html"' in post and 'href="ci-cache-keys.html"' in post
    assert not list((tmp_path / "site" / "posts").glob("*.md"))  # no Markdown sources published
    assert [p.slug for p in site.posts()] == ["hostile-title", "zh-review", "ci-cache-keys"]
    css = (tmp_path / "site" / "style.css").read_text()
    assert "70ch" in css and "system-ui" in css


def test_the_feed_is_atom_with_dates_from_the_record_not_file_times(tmp_path):
    build_demo_site(tmp_path / "site")
    feed_path = tmp_path / "site" / "feed.xml"
    before = feed_path.read_bytes()
    for page in (tmp_path / "site" / "posts").glob("*.html"):
        os.utime(page, (0, 0))  # file times say 1970; the feed must not care
    root = ET.fromstring(before)
    entries = root.findall("a:entry", ATOM)
    assert [e.find("a:title", ATOM).text for e in entries][0] == HOSTILE_TITLE  # noqa: RUF015
    published = [datetime.fromisoformat(e.find("a:published", ATOM).text) for e in entries]
    assert published == sorted(published, reverse=True)
    assert published[-1] == datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
    assert all(e.find("a:summary", ATOM).text and e.find("a:updated", ATOM).text for e in entries)
    assert entries[1].find("a:category", ATOM).get("term") == "编辑"
    assert root.find("a:link[@rel='self']", ATOM).get("href") == "http://127.0.0.1:8765/feed.xml"


def test_serve_lists_no_directory_hides_records_and_types_the_feed(tmp_path):
    build_demo_site(tmp_path / "site")
    with serving(tmp_path / "site") as base:
        with urllib.request.urlopen(f"{base}/feed.xml") as resp:
            assert resp.headers["Content-Type"] == "application/atom+xml; charset=utf-8"
        with urllib.request.urlopen(f"{base}/posts/") as resp:  # redirected to the index, not a listing
            assert resp.url.endswith("/index.html") and "Index of" not in resp.read().decode()
        for path in ("/.pipeline/posts/zh-review.json", "/.pipeline/", "/%2epipeline/lock"):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"{base}{path}")
            assert err.value.code == 404, path


@pytest.mark.slow  # seconds
def test_four_threads_publishing_to_one_site_make_no_errors(tmp_path):
    site_dir = tmp_path / "site"
    errors: list[str] = []
    threads = [threading.Thread(target=publish_n, args=(LocalSitePublisher(site_dir, "http://127.0.0.1:8765"),
                                                         f"t{t}", 40, errors)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    site = LocalSitePublisher(site_dir, "http://127.0.0.1:8765")
    assert len(site.posts()) == 160 and len(list((site_dir / "posts").glob("*.html"))) == 160
    index = (site_dir / "index.html").read_text(encoding="utf-8")
    assert index.count('<a class="title"') == 160  # the last rebuild saw every post
    assert len(ET.parse(site_dir / "feed.xml").getroot().findall("a:entry", ATOM)) == 50
    assert not [p for p in site_dir.rglob("*.tmp")]


@pytest.mark.slow  # subprocesses
def test_two_processes_publishing_to_one_site_make_no_errors(tmp_path):
    site_dir = tmp_path / "site"
    script = (
        "import sys, json; sys.path[:0] = [{repo!r}, {tests!r}]\n"
        "from pipeline.publishing.publishers.local import LocalSitePublisher\n"
        "from test_site import publish_n\n"
        "errors = []\n"
        "publish_n(LocalSitePublisher({site!r}, 'http://127.0.0.1:8765'), sys.argv[1], 30, errors)\n"
        "print(json.dumps(errors))\n"
    ).format(repo=str(REPO), tests=str(REPO / "tests"), site=str(site_dir))
    procs = [subprocess.Popen([sys.executable, "-c", script, f"p{i}"], stdout=subprocess.PIPE, text=True)
             for i in range(2)]
    errors = [e for p in procs for e in json.loads(p.communicate(timeout=120)[0] or '["no output"]')]
    assert errors == [] and all(p.returncode == 0 for p in procs)
    assert len(LocalSitePublisher(site_dir, "http://127.0.0.1:8765").posts()) == 60
    assert (site_dir / "index.html").read_text(encoding="utf-8").count('<a class="title"') == 60


@pytest.mark.slow  # a real browser
def test_the_site_in_a_real_browser(tmp_path):
    """Debian's chromium loads the index, a post and /posts/: the title escaped, the feed linked, no listing."""
    if chromium() is None:
        missing("chromium (Debian package)", "not installed; make test installs it as root",
                env="PIPELINE_REQUIRE_REAL_PLATFORMS")
    build_demo_site(tmp_path / "site")
    with serving(tmp_path / "site") as base:
        index = dump_dom(f"{base}/index.html")
        post = dump_dom(f"{base}/posts/hostile-title.html")
        listing = dump_dom(f"{base}/posts/")
    # The browser parsed the hostile title as text: no script element came out of it.
    assert "<script" not in index and "&lt;script&gt;alert" in index and "&lt;script&gt;alert" in post
    assert re.search(r'<a class="feed" href="feed.xml"[^>]*>Feed</a>', index)
    assert re.search(r'<a class="feed" href="../feed.xml"', post)
    assert "Index of" not in listing and "Field notes" in listing and ".json" not in listing
