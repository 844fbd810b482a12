"""The local static-site publisher: a small readable site (pages, index, Atom feed) under a directory.

Layout of ``[publish.local] dir``::

    index.html              every post, newest first: title, date, tags, summary
    posts/<slug>.html       one article: title, date, author, tags, prev/next; the disclosure
    feed.xml                Atom (feedgen): id, title, link, published, updated, summary, content
    style.css               one small stylesheet: system fonts, a ~70-character measure, phone-ready
    .pipeline/posts/<slug>.json   what the pipeline knows about each post (idempotency key, content
                            hash, dates, tags): the platform's record that ``find`` reads after a crash.
                            Hidden: ``pipeline serve`` refuses dot paths, and no page mentions them.

Pages come from Jinja2 templates with autoescape (``pipeline/publishing/templates/site``);
titles are shown with control characters made visible and the feed drops what
XML forbids (``pipeline.text.untrusted``). Metadata comes from the ledger through the
publish capability (the publication's time, the topic's tags) and is written
to the post's record, never parsed back out of HTML.

Disclosure (``pipeline.text.disclosure``, on unless ``[publish.disclosure] enabled = false``): a page shows
the configured line above the article (``<p class="ai-disclosure">``) and carries
``<meta name="AIGC" content="{…GB 45438-2025 fields…}">``; its feed entry starts its content with the
same line and has the category ``ai-generated`` (label: the line). Both are in the post's record, so a
page rebuilt later keeps what it was published with.

Concurrency: the daemon runs channels in threads and several processes may
share a site. Every file is written to a unique temporary name (``mkstemp``)
in its directory, fsynced and renamed, so a crash never leaves half a file and
two writers never share a temporary file. Rebuilding the index, the feed and a
neighbour's prev/next links happens under a lock (a thread lock plus
``flock`` on ``.pipeline/lock``) so the last rebuild always sees every post.
"""

from __future__ import annotations

import fcntl
import html
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config import PublishConfig, resolve
from ...score.scores import detect_language
from ...text.content import to_html
from ...text.disclosure import CATEGORY, Disclosure
from ...text.files import atomic_write
from ...text.untrusted import for_xml, visible
from . import Published

if TYPE_CHECKING:
    import io
    import os
    from http.server import SimpleHTTPRequestHandler
    from typing import BinaryIO

    from jinja2 import Environment

FEED_ENTRIES = 50
SUMMARY_CHARS = 160
TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "site"
META_DIR = ".pipeline"

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_serve_guard = threading.Lock()  # one check's server at a time in this process


@lru_cache(maxsize=1)
def _env() -> Environment:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    return Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "xml"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _summary(body_html: str) -> str:
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body_html))).strip()
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS].rsplit(" ", 1)[0].rstrip(",.;:，。") + "…"


def _utc(dt: datetime | None) -> datetime:
    if dt is None:
        return datetime.now(timezone.utc)
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


@dataclass
class Post:
    """One post's record, as ``.pipeline/posts/<slug>.json`` holds it."""

    slug: str
    key: str
    content_hash: str
    title: str
    published: str  # ISO 8601, UTC
    updated: str
    language: str
    body_html: str
    summary: str = ""
    author: str = ""
    tags: list[str] = field(default_factory=list)
    disclosure: str = ""  # the visible line ("" when disclosure was off)
    aigc: str = ""  # the AIGC metadata, JSON

    @property
    def published_at(self) -> datetime:
        return datetime.fromisoformat(self.published)

    def view(self) -> dict[str, Any]:
        """What the templates see: display-safe title and tags (autoescape does the HTML escaping)."""
        return {"slug": self.slug, "title": visible(self.title), "author": visible(self.author),
                "tags": [visible(t) for t in self.tags], "summary": visible(self.summary),
                "body_html": self.body_html, "published_iso": self.published,
                "disclosure": visible(self.disclosure), "aigc": self.aigc,
                "published_date": self.published_at.strftime("%Y-%m-%d")}


class LocalSitePublisher:
    name = "local"
    # The publish capability passes the ledger's metadata (publication time, tags) to publish().
    takes_metadata = True

    def __init__(self, directory: Path, base_url: str, *, title: str = "Posts", author: str = "",
                 disclosure: Disclosure | None = None) -> None:
        self.disclosure = disclosure
        self.dir = Path(directory)
        self.base_url = base_url.rstrip("/")
        self.title = title
        self.author = author

    # --- paths and records ----------------------------------------------------

    @property
    def _records(self) -> Path:
        return self.dir / META_DIR / "posts"

    def _page_path(self, url: str) -> Path:
        return self.dir / url[len(self.base_url) + 1:]

    def _url(self, slug: str) -> str:
        return f"{self.base_url}/posts/{slug}.html"

    def _read(self, path: Path) -> Post | None:
        try:
            return Post(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None  # removed while listing, or not one of ours

    def posts(self) -> list[Post]:
        """Every post, newest first (by publication time, then slug)."""
        found = [p for p in (self._read(f) for f in self._records.glob("*.json")) if p is not None]
        return sorted(found, key=lambda p: (p.published_at, p.slug), reverse=True)

    @contextmanager
    def _site_lock(self) -> Iterator[None]:
        """One rebuild at a time, across the threads of this process and across processes."""
        key = str(self.dir.resolve())
        with _locks_guard:
            lock = _locks.setdefault(key, threading.Lock())
        with lock:
            (self.dir / META_DIR).mkdir(parents=True, exist_ok=True)
            with open(self.dir / META_DIR / "lock", "a+") as fh:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    # --- the Publisher protocol ----------------------------------------------

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str,
                published_at: datetime | None = None, tags: list[str] | tuple[str, ...] = ()) -> Published:
        # for_xml: the page's body is also the feed's content; XML forbids some control characters, and
        # bidi overrides and C1 controls would reorder or hide what a reader sees.
        body_html = for_xml(to_html(body_markdown))
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        language = detect_language(title + body_markdown)
        d = self.disclosure
        post = Post(slug=slug, key=key, content_hash=content_hash, title=title,
                    published=_utc(published_at).isoformat(timespec="seconds"), updated=now,
                    language=language, body_html=body_html, summary=_summary(body_html),
                    author=self.author, tags=list(tags),
                    disclosure=d.text(language) if d else "",
                    aigc=d.aigc_json(key=key, content_hash=content_hash, propagator=self.base_url) if d else "")
        with self._site_lock():
            posts = [p for p in self.posts() if p.slug != slug] + [post]
            posts.sort(key=lambda p: (p.published_at, p.slug), reverse=True)
            i = posts.index(post)
            # The page first, the record last: a record always has its page (find() trusts records).
            self._write_page(posts, i)
            atomic_write(self._records / f"{slug}.json", json.dumps(asdict(post), ensure_ascii=False, indent=1))
            for j in (i - 1, i + 1):  # the neighbours' prev/next links now point at this post
                if 0 <= j < len(posts):
                    self._write_page(posts, j)
            self._write_index(posts)
        url = self._url(slug)
        return Published(url=url, local_check=str(self._page_path(url)), key=key, content_hash=content_hash)

    def find(self, *, key: str, slug: str) -> Published | None:
        """The post carrying this idempotency key: the slug's record first, then any record (a renamed slug)."""
        first = self._records / f"{slug}.json"
        for path in [first] + [p for p in self._records.glob("*.json") if p != first]:
            post = self._read(path)
            if post is not None and post.key == key and (self.dir / "posts" / f"{post.slug}.html").exists():
                url = self._url(post.slug)
                return Published(url=url, local_check=str(self._page_path(url)), key=post.key,
                                 content_hash=post.content_hash)
        return None

    def withdraw(self, published: Published) -> None:
        """Take a post that could not be verified off the site: its page and record go, the index, the feed
        and its neighbours' prev/next links are rebuilt without it. Nothing unverified stays live."""
        slug = Path(published.url).stem
        with self._site_lock():
            before = [p.slug for p in self.posts()]
            (self._records / f"{slug}.json").unlink(missing_ok=True)  # the record first: find() trusts records
            (self.dir / "posts" / f"{slug}.html").unlink(missing_ok=True)
            posts = self.posts()
            if slug in before:  # its neighbours linked to it: they now link to each other
                i = before.index(slug)
                for j in (i - 1, i):
                    if 0 <= j < len(posts):
                        self._write_page(posts, j)
            self._write_index(posts)

    def check_address(self) -> tuple[str, int] | None:
        """Where this site may be served for a check (``serving``): a loopback ``http`` base_url on an
        unprivileged port with no path prefix (the URLs ``pipeline serve`` answers); None otherwise."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.base_url)
        host = {"localhost": "127.0.0.1"}.get(parts.hostname or "", parts.hostname or "")
        port = parts.port or 80
        if parts.scheme != "http" or host not in ("127.0.0.1", "::1") or port < 1024 or parts.path.strip("/"):
            return None
        return host, port

    @contextmanager
    def serving(self) -> Iterator[bool]:
        """Serve this site at ``base_url`` for the length of a check, when nothing else does; yields whether it does.

        The check then gets its answer over HTTP from the handler ``pipeline serve`` uses. A port already taken
        means another server answers there (its answer is the one that counts), and so does no ``check_address``:
        False.
        """
        import socket
        from http.server import ThreadingHTTPServer

        address = self.check_address()
        if address is None:
            yield False
            return
        host, port = address

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        with _serve_guard:
            try:
                server = Server((host, port), site_handler(self.dir.resolve()))
            except OSError:
                yield False
                return
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                      name=f"site check {port}")
            thread.start()
            try:
                yield True
            finally:
                server.shutdown()
                server.server_close()
                thread.join()

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        path = self._page_path(published.url)
        if not path.exists():
            return f"{path} does not exist"
        post = self._read(self._records / f"{path.stem}.json")
        if post is None or post.content_hash != content_hash:
            return f"{path} does not hold this article (content hash differs)"
        return None

    # --- rendering ------------------------------------------------------------

    def _site(self) -> dict[str, Any]:
        return {"title": visible(self.title)}

    def _write_page(self, posts: list[Post], i: int) -> None:
        post = posts[i]
        newer = posts[i - 1].view() if i > 0 else None
        older = posts[i + 1].view() if i + 1 < len(posts) else None
        html = _env().get_template("post.html").render(site=self._site(), root="../", lang=post.language,
                                                         post=post.view(), newer=newer, older=older)
        atomic_write(self.dir / "posts" / f"{post.slug}.html", html)

    def _write_index(self, posts: list[Post]) -> None:
        lang = posts[0].language if posts else "en"
        env = _env()
        atomic_write(self.dir / "index.html", env.get_template("index.html").render(
            site=self._site(), root="", lang=lang, posts=[p.view() for p in posts]))
        css = (TEMPLATES / "style.css").read_bytes()
        target = self.dir / "style.css"
        if not target.exists() or target.read_bytes() != css:
            atomic_write(target, css)
        atomic_write(self.dir / "feed.xml", self._feed(posts[:FEED_ENTRIES]))

    def _feed(self, posts: list[Post]) -> bytes:
        """An Atom (RFC 4287) feed built by feedgen; text passes ``for_xml`` (lxml refuses what XML forbids)."""
        from feedgen.feed import FeedGenerator

        fg = FeedGenerator()
        fg.id(f"{self.base_url}/")
        fg.title(for_xml(self.title))
        fg.author({"name": for_xml(self.author or self.title)})
        fg.link(href=f"{self.base_url}/feed.xml", rel="self", type="application/atom+xml")
        fg.link(href=f"{self.base_url}/index.html", rel="alternate", type="text/html")
        fg.language(posts[0].language if posts else "en")
        fg.updated(max((datetime.fromisoformat(p.updated) for p in posts), default=datetime.now(timezone.utc)))
        for p in posts:  # newest first, as the index
            fe = fg.add_entry(order="append")
            url = self._url(p.slug)
            fe.id(url)
            fe.title(for_xml(p.title))
            fe.link(href=url, rel="alternate", type="text/html")
            fe.published(p.published_at)
            fe.updated(datetime.fromisoformat(p.updated))
            if p.summary:
                fe.summary(for_xml(p.summary))
            label = f'<p class="ai-disclosure">{html.escape(p.disclosure, quote=False)}</p>\n' if p.disclosure else ""
            fe.content(for_xml(label + p.body_html), type="html")
            if p.disclosure:  # machine-readable: a reader can filter on it
                fe.category(term=CATEGORY, label=for_xml(p.disclosure))
            for tag in p.tags:
                fe.category(term=for_xml(tag))
        atom: bytes = fg.atom_str(pretty=True)
        return atom


def from_config(publish: PublishConfig, base_dir: Path) -> LocalSitePublisher:
    """Entry point ``local`` of the ``pipeline.publishers`` group."""
    local = publish.local
    return LocalSitePublisher(resolve(base_dir, local.dir), local.base_url, title=local.title, author=local.author,
                              disclosure=Disclosure.of(publish))


# --- serving ---------------------------------------------------------------------


def site_handler(directory: Path) -> Callable[..., SimpleHTTPRequestHandler]:
    """A request handler for ``pipeline serve``: the site only, with the right types.

    No directory listings (``/posts/`` redirects to the index), nothing under a dot path (the records and temporary
    files), the feed as ``application/atom+xml`` and text as UTF-8.
    """
    import functools
    from http import HTTPStatus
    from http.server import SimpleHTTPRequestHandler

    class SiteHandler(SimpleHTTPRequestHandler):
        extensions_map = {**SimpleHTTPRequestHandler.extensions_map,  # noqa: RUF012  (http.server's attribute, typed per instance)
                          ".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                          ".xml": "application/atom+xml; charset=utf-8"}

        def log_message(self, *args: Any) -> None:
            pass

        def send_head(self) -> io.BytesIO | BinaryIO | None:
            parts = [p for p in self.path.split("?", 1)[0].split("#", 1)[0].split("/") if p]
            if any(p.startswith(".") or p.startswith("%2e") or p.startswith("%2E") for p in parts):
                self.send_error(HTTPStatus.NOT_FOUND, "Not found")
                return None
            return super().send_head()

        def list_directory(self, path: str | os.PathLike[str]) -> io.BytesIO | None:
            # Never a listing: /posts/ leads to the index, any other directory is not found.
            if self.path.split("?", 1)[0].rstrip("/") == "/posts":
                self.send_response(HTTPStatus.FOUND)
                self.send_header("Location", "/index.html")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            self.send_error(HTTPStatus.NOT_FOUND, "Not found")
            return None

    return functools.partial(SiteHandler, directory=str(directory))
