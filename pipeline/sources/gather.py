"""A topic's sources: read with bounds, their main text extracted, each stored once in the ledger.

A source is named by the backlog (``title | angle | notes/nightly.md https://…``; a CSV's ``sources`` column), or
is a feed item's linked page. It is one of:

* a local file (Markdown or text) or a folder of them: the operator's own **notes** (first person allowed);
* an ``http(s)`` URL: a **web** page, fetched with httpx (``[topic] source_timeout_s``, at most
  ``MAX_BYTES``), its main text extracted by trafilatura (navigation and boilerplate left out).

Nothing else is read (no ``file:``, ``ftp:`` or other schemes). A source's text is data: it is quoted to the model
inside ``<source>`` tags, never obeyed. A source that cannot be read is skipped with a warning naming it and why;
the draft step refuses a topic left with none (``NoSources``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pipeline.errors import AgentIncompleteError
from pipeline.runtime import deadline
from pipeline.score.scores import detect_language

log = logging.getLogger(__name__)

MAX_BYTES = 2_000_000     # a page or file larger than this is not read (a source is an article, not a dump)
MAX_CHARS = 60_000        # the extracted text kept of one source
MAX_FILES = 20            # files read from one folder
TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".rst")


class NoSources(AgentIncompleteError):
    """The topic has no source that could be read: it is not drafted (an article from nothing is invented)."""

    def __init__(self, title: str, backlog: str) -> None:
        super().__init__({"draft"}, f"topic '{title}' has no usable source, so it is not drafted: name notes files or "
                                    f"links after its angle in {backlog} ('title | angle | notes/topic.md https://…'), "
                                    "or give [topic] feeds whose items link to pages")


@dataclass(frozen=True)
class Read:
    """One source as read: what the ledger stores."""

    kind: str
    location: str
    url: str | None
    title: str
    language: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def split_names(field: str | None) -> list[str]:
    """The source names of a backlog field: separated by white space or commas."""
    return [n for n in re.split(r"[\s,]+", field or "") if n]


def _title_of(text: str, fallback: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.lstrip("#").strip()[:200] or fallback
    return fallback


def _read_file(path: Path) -> Read:
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path.stat().st_size} bytes, over the {MAX_BYTES:,}-byte limit")
    text = path.read_text(encoding="utf-8").strip()[:MAX_CHARS]
    if not text:
        raise ValueError("empty")
    return Read("notes", str(path), None, _title_of(text, path.stem), detect_language(text), text)


def _extract(html: str, url: str) -> tuple[str, str]:
    """(title, main text) of an HTML page."""
    import trafilatura

    text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True, favor_precision=True) or ""
    meta = trafilatura.extract_metadata(html, default_url=url)
    title = (meta.title if meta is not None and meta.title else "") or _title_of(text, urlsplit(url).netloc)
    return title, text


def _fetch(url: str, timeout_s: float) -> Read:
    import httpx

    def get() -> tuple[bytes, str, str]:
        with httpx.stream("GET", url, timeout=timeout_s, follow_redirects=True,
                          headers={"User-Agent": "pipeline (source fetch)"}) as resp:
            resp.raise_for_status()
            if urlsplit(str(resp.url)).scheme not in ("http", "https"):
                raise ValueError(f"redirected to {resp.url}")
            body = b""
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ValueError(f"over the {MAX_BYTES:,}-byte limit")
            return body, resp.headers.get("content-type", ""), str(resp.url)

    body, ctype, final = deadline.http(get, total_s=timeout_s * 2)  # a server trickling bytes cannot hold the run
    raw = body.decode("utf-8", errors="replace")
    if "html" in ctype or raw.lstrip()[:1] == "<":
        title, text = _extract(raw, final)
    else:
        text = raw.strip()
        title = _title_of(text, urlsplit(final).netloc)
    text = text.strip()[:MAX_CHARS]
    if len(text) < 200:
        raise ValueError(f"only {len(text)} characters of text on the page")
    return Read("web", url, final, title, detect_language(text), text)


def read(name: str, base: Path, timeout_s: float) -> list[Read]:
    """The source(s) ``name`` stands for: a URL, a file, or the text files of a folder (sorted, at most MAX_FILES).
    ValueError saying why when it cannot be read."""
    import httpx

    scheme = urlsplit(name).scheme
    if scheme in ("http", "https"):
        try:
            return [_fetch(name, timeout_s)]
        except (httpx.HTTPError, ValueError, UnicodeError) as exc:  # the reason is what the operator needs
            raise ValueError(f"{type(exc).__name__}: {exc}") from None
    if scheme and len(scheme) > 1:
        raise ValueError(f"'{scheme}:' sources are not read: give a file, a folder or an http(s) URL")
    path = (base / name).expanduser().resolve()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES and p.is_file())[:MAX_FILES]
        if not files:
            raise ValueError("a folder with no text files (.md, .txt)")
        return [_read_file(p) for p in files]
    if not path.is_file():
        raise ValueError("no such file")
    return [_read_file(path)]


def gather(names: list[str], base: Path, timeout_s: float) -> list[Read]:
    """Every source ``names`` stand for, in order, each once; an unreadable one is skipped with a warning."""
    out: list[Read] = []
    for name in names:
        try:
            for r in read(name, base, timeout_s):
                if all(r.location != o.location for o in out):
                    out.append(r)
        except (ValueError, OSError) as exc:
            log.warning("source %s skipped: %s", name, exc)
    return out


def store(ledger: Any, topic_id: int, found: list[Read]) -> None:
    """Each source once (same location, same text: the row already there), linked to the topic in order."""
    from sqlmodel import select

    from pipeline.ledger.models import Source, TopicSource

    with ledger.write() as s:
        for position, r in enumerate(found, 1):
            row = s.exec(select(Source).where(Source.location == r.location, Source.sha256 == r.sha256)).first()
            if row is None:
                row = Source(kind=r.kind, location=r.location, url=r.url, title=r.title, language=r.language,
                             sha256=r.sha256, text=r.text)
                s.add(row)
                s.flush()
            linked = s.exec(select(TopicSource).where(TopicSource.topic_id == topic_id,
                                                      TopicSource.source_id == row.id)).first()
            if linked is None:
                s.add(TopicSource(topic_id=topic_id, source_id=row.id, position=position))


def of_topic(ledger: Any, topic_id: int) -> list[Any]:
    """The topic's sources, in their Sources-list order."""
    from sqlmodel import select

    from pipeline.ledger.models import Source, TopicSource

    with ledger.read() as s:
        links = s.exec(select(TopicSource).where(TopicSource.topic_id == topic_id)).all()
        rows = {link.position: s.get(Source, link.source_id) for link in links}
    return [rows[p] for p in sorted(rows)]
