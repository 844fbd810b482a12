"""The local static-site publisher: HTML and Markdown files under a directory.

Each article becomes ``posts/<slug>.html`` (and ``.md``) with the content hash
and idempotency key in ``<meta>`` tags, ``index.html`` lists every post and
``feed.xml`` is an Atom feed of them, so a reader or an aggregator can follow
the site. Files are written to a temporary name, fsynced and renamed, so a
crash never leaves half a page. The meta tags are what ``find`` reads back
after a crash: the directory itself is the platform's record.
"""

from __future__ import annotations

import html
import os
import re
from datetime import datetime, timezone
from pathlib import Path

from ..config import Config
from ..content import to_html
from . import Published

PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8">
<meta name="pipeline-content-hash" content="{hash}">
<meta name="pipeline-idempotency-key" content="{key}">
<title>{title}</title></head>
<body><article><h1>{title}</h1>
{body}
</article><p><a href="../index.html">All posts</a></p></body></html>
"""

_META = re.compile(r'<meta name="pipeline-(content-hash|idempotency-key)" content="([0-9a-f]*)">')
_TITLE = re.compile(r"<title>(.*?)</title>", re.DOTALL)
_ARTICLE = re.compile(r"<article>(.*?)</article>", re.DOTALL)
FEED_ENTRIES = 50


def _atomic_write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _meta(text: str) -> dict[str, str]:
    return {name: value for name, value in _META.findall(text)}


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class LocalSitePublisher:
    name = "local"

    def __init__(self, directory: Path, base_url: str) -> None:
        self.dir = directory
        self.base_url = base_url.rstrip("/")

    def _page_path(self, url: str) -> Path:
        return self.dir / url[len(self.base_url) + 1:]

    def _published(self, page: Path) -> Published:
        meta = _meta(page.read_text(encoding="utf-8"))
        url = f"{self.base_url}/posts/{page.name}"
        return Published(url=url, local_check=str(page), key=meta.get("idempotency-key"),
                         content_hash=meta.get("content-hash"))

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Published:
        lang = "zh" if re.search(r"[\u4e00-\u9fff]", title + body_markdown) else "en"
        page = PAGE.format(lang=lang, hash=content_hash, key=key, title=html.escape(title), body=to_html(body_markdown))
        _atomic_write(self.dir / "posts" / f"{slug}.md", f"# {title}\n\n{body_markdown}\n")
        _atomic_write(self.dir / "posts" / f"{slug}.html", page)
        self._write_index()
        url = f"{self.base_url}/posts/{slug}.html"
        return Published(url=url, local_check=str(self._page_path(url)), key=key, content_hash=content_hash)

    def find(self, *, key: str, slug: str) -> Published | None:
        """The page carrying this idempotency key: the slug's page first, then any page (a renamed slug)."""
        first = self.dir / "posts" / f"{slug}.html"
        pages = [first] + [p for p in self._pages() if p != first]
        for page in pages:
            try:
                found = self._published(page)
            except OSError:
                continue
            if found.key == key:
                return found
        return None

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        path = self._page_path(published.url)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return f"{path} does not exist"
        if f'content="{content_hash}"' not in text:
            return f"{path} does not hold this article (content hash differs)"
        return None

    def _pages(self) -> list[Path]:
        """Pages newest first; a page removed while listing is skipped, not an error."""
        stamped = []
        for p in (self.dir / "posts").glob("*.html"):
            try:
                stamped.append((p.stat().st_mtime, p))
            except OSError:
                continue
        return [p for _, p in sorted(stamped, reverse=True)]

    def _write_index(self) -> None:
        entries = []
        for p in self._pages():
            try:
                text, mtime = p.read_text(encoding="utf-8"), p.stat().st_mtime
            except OSError:
                continue
            m = _TITLE.search(text)
            body = _ARTICLE.search(text)
            entries.append((p, m.group(1) if m else html.escape(p.stem), body.group(1) if body else "", mtime))
        items = [f'<li><a href="posts/{p.name}">{title}</a></li>' for p, title, _, _ in entries]
        _atomic_write(self.dir / "index.html",
                      "<!doctype html><html><head><meta charset=\"utf-8\"><title>Posts</title>"
                      "<link rel=\"alternate\" type=\"application/atom+xml\" href=\"feed.xml\"></head>"
                      f"<body><h1>Posts</h1><ul>\n{chr(10).join(items)}\n</ul></body></html>\n")
        _atomic_write(self.dir / "feed.xml", self._feed(entries[:FEED_ENTRIES]))

    def _feed(self, entries: list[tuple[Path, str, str, float]]) -> str:
        """An Atom (RFC 4287) feed. Titles and bodies are HTML taken from the pages, so they go in as escaped type="html"."""
        updated = _iso(max((e[3] for e in entries), default=0.0))
        parts = [
            '<?xml version="1.0" encoding="utf-8"?>',
            '<feed xmlns="http://www.w3.org/2005/Atom">',
            "<title>Posts</title>",
            f"<id>{html.escape(self.base_url)}/</id>",
            f'<link rel="self" href="{html.escape(self.base_url)}/feed.xml"/>',
            f'<link rel="alternate" type="text/html" href="{html.escape(self.base_url)}/index.html"/>',
            f"<updated>{updated}</updated>",
            "<author><name>pipeline</name></author>",
        ]
        for page, title, body, mtime in entries:
            url = html.escape(f"{self.base_url}/posts/{page.name}")
            parts += [
                "<entry>",
                f"<title type=\"html\">{html.escape(title)}</title>",
                f"<id>{url}</id>",
                f'<link rel="alternate" type="text/html" href="{url}"/>',
                f"<updated>{_iso(mtime)}</updated>",
                f'<content type="html">{html.escape(body)}</content>',
                "</entry>",
            ]
        parts.append("</feed>")
        return "\n".join(parts) + "\n"


def from_config(cfg: Config) -> LocalSitePublisher:
    """Entry point ``local`` of the ``pipeline.publishers`` group."""
    return LocalSitePublisher(cfg.path(cfg.publish.local.dir), cfg.publish.local.base_url)
