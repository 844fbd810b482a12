"""The local static-site publisher: HTML and Markdown files under a directory.

Each article becomes ``posts/<slug>.html`` (and ``.md``) with the content hash
in a ``<meta>`` tag, and ``index.html`` lists every post. Files are written
to a temporary name, fsynced and renamed, so a crash never leaves half a page.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

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


def _atomic_write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class LocalSitePublisher:
    name = "local"

    def __init__(self, directory: Path, base_url: str) -> None:
        self.dir = directory
        self.base_url = base_url.rstrip("/")

    def _page_path(self, url: str) -> Path:
        return self.dir / url[len(self.base_url) + 1:]

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Published:
        lang = "zh" if re.search(r"[\u4e00-\u9fff]", title + body_markdown) else "en"
        page = PAGE.format(lang=lang, hash=content_hash, key=key, title=html.escape(title), body=to_html(body_markdown))
        _atomic_write(self.dir / "posts" / f"{slug}.md", f"# {title}\n\n{body_markdown}\n")
        _atomic_write(self.dir / "posts" / f"{slug}.html", page)
        self._write_index()
        url = f"{self.base_url}/posts/{slug}.html"
        return Published(url=url, local_check=str(self._page_path(url)))

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        path = self._page_path(published.url)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return f"{path} does not exist"
        if f'content="{content_hash}"' not in text:
            return f"{path} does not hold this article (content hash differs)"
        return None

    def _write_index(self) -> None:
        posts = sorted((self.dir / "posts").glob("*.html"), key=lambda p: p.stat().st_mtime, reverse=True)
        items = []
        for p in posts:
            m = re.search(r"<title>(.*?)</title>", p.read_text(encoding="utf-8"))
            items.append(f'<li><a href="posts/{p.name}">{m.group(1) if m else p.stem}</a></li>')
        _atomic_write(self.dir / "index.html",
                      "<!doctype html><html><head><meta charset=\"utf-8\"><title>Posts</title></head>"
                      f"<body><h1>Posts</h1><ul>\n{chr(10).join(items)}\n</ul></body></html>\n")
