"""Headless Chromium (Debian's ``chromium`` package) against the local site, for tests and screenshots.

``bench/site_screenshots.py`` and ``tests/test_site.py`` share this: a demo
site with real posts (Chinese, English, a hostile title), served by
``pipeline serve``'s own handler on 127.0.0.1, and the browser calls.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path

from pipeline.publishing.publishers.local import LocalSitePublisher, site_handler
from pipeline.text.content import content_hash

HOSTILE_TITLE = 'Escaping <script>alert("x")</script> & "quotes" in titles'

DEMO = [
    ("ci-cache-keys", "Why our nightly builds got faster", ["ci", "caching"],
     "Forty minutes. That was our nightly build a year ago, and now it takes nine.\n\n"
     "Most of the savings came from dull fixes rather than clever tricks. The cache was keyed on the wrong "
     "file, so every job started cold; fixing the key took an afternoon.\n\n"
     "## What we measured\n\n- cold cache: 40 min\n- warm cache: 14 min\n- without the sleeps: 9 min\n\n"
     "> Measure first, then delete things.\n\n```sh\nmake test -j4\n```\n"),
    ("zh-review", "为什么我们让编辑先看一遍再发布", ["编辑", "流程"],
     "AI 写的文章常常需要人看一眼才能发布。我们在流水线里加了一个审核环节：生成和润色之后，"
     "文章停在“待审核”状态，编辑确认后才发布、登记和汇报。\n\n"
     "这样做的代价是多了一步，但换来的是每一篇发出去的文章都有人负责。"
     "审核人和审核时间都写进台账，之后随时可以查。\n"),
    ("hostile-title", HOSTILE_TITLE, ["security"],
     "A title is untrusted text: it is escaped everywhere it is shown, in pages, the index and the feed.\n"),
]


def build_demo_site(directory: Path) -> LocalSitePublisher:
    site = LocalSitePublisher(directory, "http://127.0.0.1:8765", title="Field notes", author="Pipeline Editors")
    start = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
    for i, (slug, title, tags, body) in enumerate(DEMO):
        site.publish(key=f"{i:064x}", slug=slug, title=title, body_markdown=body,
                     content_hash=content_hash(title, body), published_at=start + timedelta(days=i), tags=tags)
    return site


@contextmanager
def serving(directory: Path) -> Iterator[str]:
    """The site served as ``pipeline serve`` serves it; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), site_handler(directory))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no state between calls
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def dump_dom(url: str) -> str:
    """The DOM after the page loaded, as the browser built it."""
    proc = _run(["--dump-dom", url])
    if proc.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom {url} exited {proc.returncode}: {proc.stderr[-500:]}")
    return proc.stdout


def screenshot(url: str, path: Path, width: int, height: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = _run([f"--window-size={width},{height}", "--force-device-scale-factor=1", f"--screenshot={path}", url])
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError(f"chromium --screenshot {url} exited {proc.returncode}: {proc.stderr[-500:]}")
    return path
