"""The ``wechat`` publisher: a WeChat Official Account (公众号), which publishes asynchronously.

The platform's documented sequence (developers.weixin.qq.com, 草稿箱 / 发布能力):

1. ``cgi-bin/stable_token``: the access token, valid ``expires_in`` seconds (7200).
   In its normal mode a repeated call within the validity returns the same
   token, so processes that race to refresh agree; ``force_refresh`` issues a
   new one (limited per day) and is used only when the platform rejects the
   token it just handed out. The token is cached in the ledger's
   ``platform_tokens`` table, shared by every process and worker of every
   channel, refreshed ``token_margin_s`` before expiry, and never logged:
   it travels in the query string, so error messages name the path only.
2. ``cgi-bin/material/add_material?type=image``: the cover, as permanent
   material (``thumb_media_id``); ``cgi-bin/media/uploadimg``: each image of
   the body (the body may only show images hosted by the platform).
3. ``cgi-bin/draft/add``: the draft; its ``media_id``.
4. ``cgi-bin/freepublish/submit``: ``errcode 0`` only means a publish *task*
   was accepted (``publish_id``). The platform has no idempotency key.
5. ``cgi-bin/freepublish/get``: ``publish_status`` 0 success (``article_url``
   in ``article_detail.item``), 1 publishing, 2 原创失败, 3 常规失败,
   4 审核不通过, 5 deleted by the user after success, 6 blocked after success.

The ledger row follows ``pending → submitted (publish_id) → verified
(article_url) | failed (status and reason)``, and each step's result (cover,
draft, submit intent, publish_id) is committed as soon as the platform
answers, so a crash resumes after the last recorded step:

* a crash before ``submit_started_at`` is recorded can only leave an unused
  cover or draft on the platform, never an article: the next attempt makes
  new ones;
* a crash between recording ``submit_started_at`` and recording the
  ``publish_id`` may have left a publish task the ledger cannot name. Before
  submitting again, ``freepublish/batchget`` (the published articles) is
  searched for this row's cover ``thumb_media_id`` and title; found, the
  article is adopted. Not found, the task may still be publishing (batchget
  lists only finished articles), so the row waits ``resubmit_after_min``
  before the draft is submitted again;
* a crash after the ``publish_id`` is recorded only repeats polling.

Disclosure (《人工智能生成合成内容标识办法》, in force from 2025-09-01, and GB 45438-2025): the
explicit label is text the reader sees, at the start of the article (Art. 4: 在文本的起始、末尾或者中间
适当位置添加文字提示): the configured line (``[publish.disclosure] zh``/``en``) as the content's first
paragraph, and ``【AI生成】`` at the start of the 摘要 (digest) that chats and the article list show
under the title. The implicit label is the AIGC metadata (Label 1, ContentProducer, ProduceID = the
content hash, ContentPropagator ``wechat``) as the ``data-aigc``
attribute of the ``<section>`` that holds the line. ``draft/add`` has no field for an AI-content
declaration (its article fields: title, author, digest, content, content_source_url, thumb_media_id,
need_open_comment, only_fans_can_comment, the cover crops): the 创作来源 / AI 生成 declaration that
WeChat asks of accounts exists in the mp.weixin.qq.com editor only. Whether the platform keeps the
``data-aigc`` attribute is checked against the fake (tests/wechatfake.py), not the real platform.

Errors: ``40001``/``42001``/``40014`` (token invalid or expired) refresh the
token and repeat the call once; a credential the platform still refuses,
``40125`` (wrong AppSecret), ``40013`` (wrong appid) and ``40164`` (the
caller's IP is not on the account's allowlist) are the operator's to fix
(``ConfigError``, exit 2); ``45009`` (daily quota reached) ends the run as
platform unavailable (exit 6); ``-1`` (system busy), 5xx and transport errors
are retried within the run's ``AttemptBudget``.
"""

from __future__ import annotations

import html
import json
import logging
import re
import struct
import time
import zlib
from collections.abc import Callable
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from sqlmodel import select

from ...config import PublishConfig, resolve
from ...errors import CapabilityError, ConfigError, PlatformUnavailableError
from ...ledger.models import Article, PlatformToken, Publication
from ...ledger.utc import aware, utcnow
from ...runtime import http
from ...runtime.retry import Backoff
from ...states import PublicationStatus
from ...text.article import sources_listed
from ...text.content import to_html
from ...text.disclosure import Disclosure
from . import Published, PublishOutcomeUnknown
from .remote import AttemptBudget, secret_from_env, setting_url

if TYPE_CHECKING:
    from ...ledger.writer import Ledger

log = logging.getLogger(__name__)

TOKEN_INVALID = {40001, 40014, 42001}  # invalid credential, invalid access_token, access_token expired
CREDENTIALS = {40001: "the AppSecret or the token is invalid", 40125: "the AppSecret is invalid",
               40013: "the appid is invalid", 40164: "this host's IP address is not on the account's IP allowlist"}
QUOTA = 45009
BUSY = -1
STATUS = {0: "published", 1: "publishing", 2: "原创声明失败 (originality check failed)",
          3: "常规失败 (publishing failed)", 4: "平台审核不通过 (rejected by the platform's review)",
          5: "成功后用户删除所有文章 (deleted by the account after publication)",
          6: "成功后系统封禁所有文章 (blocked by the platform after publication)"}
REMOVED = (5, 6)
MAX_POLL_PAUSE_S = 30.0
BATCHGET_PAGES = 5  # 20 articles a page: recovery looks at the account's 100 newest articles


_TOKEN_IN_URL = re.compile(r"(access_token=)[^&\s'\"]+")


class _RedactTokens(logging.Filter):
    """httpx logs each request's URL at INFO, and the platform wants the token in the URL: redact it there."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(_TOKEN_IN_URL.sub(r"\1***", str(a)) if "access_token=" in str(a) else a for a in args)
        record.msg = _TOKEN_IN_URL.sub(r"\1***", str(record.msg))
        return True


logging.getLogger("httpx").addFilter(_RedactTokens())




class WeChatError(CapabilityError):
    """An errcode the platform answered with: the call was refused, nothing was done."""

    def __init__(self, errcode: int, errmsg: str, what: str) -> None:
        self.errcode, self.errmsg, self.what = errcode, errmsg, what
        super().__init__(f"wechat {what}: errcode {errcode} ({errmsg})")


class NotSent(Exception):
    """The request never reached the platform (connection refused): safe to send again."""


class NoAnswer(Exception):
    """The request may have reached the platform, but no answer came back."""


# --- the shared access token --------------------------------------------------


class TokenStore:
    """The account's access token, cached in the ledger for every process and worker.

    ``fetch(force)`` returns ``(token, expires_in)`` from ``stable_token``. Nothing
    is locked across the HTTP call: stable_token hands every caller the same token
    while it is valid, so two workers refreshing at once agree anyway.
    """

    def __init__(self, ledger: Ledger, name: str, fetch: Callable[[bool], tuple[str, int]], margin_s: float) -> None:
        self.ledger = ledger
        self.name = name
        self.fetch = fetch
        self.margin = timedelta(seconds=margin_s)

    def get(self) -> str:
        with self.ledger.read() as s:
            row = s.get(PlatformToken, self.name)
            cached = (row.token, aware(row.expires_at)) if row else None
        if cached and cached[1] - self.margin > utcnow():
            return cached[0]
        return self._store(*self.fetch(False))

    def rejected(self, bad: str) -> str:
        """The platform said ``bad`` is invalid or expired: a fresh token, forced only if stable_token repeats it."""
        token, expires_in = self.fetch(False)
        if token == bad:
            token, expires_in = self.fetch(True)
        return self._store(token, expires_in)

    def _store(self, token: str, expires_in: int) -> str:
        now = utcnow()
        with self.ledger.write() as s:
            row = s.get(PlatformToken, self.name) or PlatformToken(name=self.name, token=token, expires_at=now)
            row.token, row.expires_at, row.fetched_at = token, now + timedelta(seconds=expires_in), now
            s.add(row)
        return token


# --- Markdown to the HTML the platform accepts ---------------------------------

_ALLOWED = {"p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "u", "s", "del", "blockquote",
            "ul", "ol", "li", "pre", "code", "hr", "img", "table", "thead", "tbody", "tr", "th", "td", "a", "sup", "sub"}
_DROP_WITH_CONTENT = {"script", "style", "iframe", "object", "embed", "form", "noscript", "svg", "math"}
_VOID = {"br", "hr", "img"}
_PLATFORM_HOSTS = ("mp.weixin.qq.com", "mmbiz.qpic.cn", "mmbiz.qlogo.cn")


def _platform_hosted(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in _PLATFORM_HOSTS)


class _Sanitizer(HTMLParser):
    """An allowlist of tags and attributes: no scripts or styles, no links off the platform, images re-hosted.

    A link to another site is not allowed in an article body, so it becomes its
    text followed by the address in plain text; an image is replaced by the URL
    ``upload(src)`` returns, or by its alt text when it cannot be uploaded.
    """

    def __init__(self, upload: Callable[[str], str | None]) -> None:
        super().__init__(convert_charrefs=True)
        self.upload = upload
        self.out: list[str] = []
        self.skip = 0
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROP_WITH_CONTENT:
            self.skip += tag not in _VOID
            return
        if self.skip or tag not in _ALLOWED:
            return
        a = dict(attrs)
        if tag == "a":
            href = a.get("href") or ""
            keep = href if _platform_hosted(href) else None
            self.links.append(None if keep else href)
            if keep:
                self.out.append(f'<a href="{html.escape(keep)}">')
            return
        if tag == "img":
            src = self.upload(a.get("src") or "")
            if src:
                self.out.append(f'<img src="{html.escape(src)}" alt="{html.escape(a.get("alt") or "")}">')
            elif a.get("alt"):
                self.out.append(html.escape(a["alt"]))
            return
        self.out.append(f"<{tag}>")

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROP_WITH_CONTENT:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip or tag not in _ALLOWED or tag in _VOID:
            return
        if tag == "a":
            href = self.links.pop() if self.links else None
            if href is None:
                self.out.append("</a>")
            elif urlsplit(href).scheme in ("http", "https"):  # javascript:, mailto:, #anchors: text only
                self.out.append(f" ({html.escape(href)})")
            return
        self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(html.escape(data, quote=False))


def article_html(markdown: str, upload: Callable[[str], str | None]) -> str:
    """The article body as the platform takes it: Markdown rendered, then filtered by ``_Sanitizer``."""
    parser = _Sanitizer(upload)
    parser.feed(to_html(markdown))
    parser.close()
    return "".join(parser.out)


def digest_of(markdown: str, limit: int = 54) -> str:
    """The 摘要 shown under the title in chats: the first words of the body, as plain text."""
    text = re.sub(r"<[^>]+>", "", to_html(markdown))
    text = re.sub(r"\s+", " ", html.unescape(text)).strip()
    return text[:limit]


DIGEST_LABEL = {"zh": "【AI生成】", "en": "[AI-generated] "}


def labelled(d: Disclosure, article: Article, digest: str, content: str, key: str) -> tuple[str, str]:
    """The digest and content with the explicit label, and the implicit one on the label's section."""
    aigc = html.escape(d.aigc_json(key=key, content_hash=article.content_hash, propagator="wechat"))
    text = html.escape(d.text(article.language), quote=False)
    lead = f'<section data-aigc="{aigc}"><p>{text}</p></section>'
    tag = DIGEST_LABEL.get(article.language, DIGEST_LABEL["en"])
    return (tag + digest)[:120], lead + content


def cover_png(seed: str, width: int = 900, height: int = 383) -> bytes:
    """A plain cover (2.35:1, the platform's cover ratio) in a colour drawn from ``seed``: no imaging library needed."""
    h = zlib.crc32(seed.encode())
    top = ((h >> 16) & 0x7F) + 40, ((h >> 8) & 0x7F) + 40, (h & 0x7F) + 60
    rows = []
    for y in range(height):  # a vertical gradient, so the cover is not a flat block
        shade = y * 60 // height
        row = bytes(min(255, c + shade) for c in top) * width
        rows.append(b"\x00" + row)
    raw = zlib.compress(b"".join(rows), 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


# --- the publisher --------------------------------------------------------------


class WeChatPublisher:
    """Publishes through draft/add and freepublish/submit, tracking each step in the publication row."""

    name = "wechat"
    # The capability drives ``advance`` instead of ``publish``: the outcome arrives later.
    asynchronous = True

    def __init__(self, publish: PublishConfig, base_dir: Path, *, appid: str, secret: str, api_base: str) -> None:
        self.wc = publish.wechat
        self.disclosure = Disclosure.of(publish)
        self.appid = appid
        self.secret = secret
        self.api_base = api_base
        self.timeout_s = publish.timeout_s
        self.retries = publish.retries
        self.backoff_s = publish.backoff_s
        self.base_dir = base_dir
        self.budget: AttemptBudget | None = None
        self.ledger: Ledger | None = None  # set by the caller: the token cache and the row's steps live there
        self._tokens: TokenStore | None = None
        self._sleep = time.sleep

    # --- HTTP -------------------------------------------------------------------

    @property
    def tokens(self) -> TokenStore:
        if self.ledger is None:
            raise RuntimeError("WeChatPublisher.ledger is not set")
        if self._tokens is None or self._tokens.ledger is not self.ledger:
            self._tokens = TokenStore(self.ledger, f"wechat:{self.appid}", self._fetch_token, self.wc.token_margin_s)
        return self._tokens

    def _scrub(self, text: str) -> str:
        text = text.replace(self.secret, "***")
        return _TOKEN_IN_URL.sub(r"\1***", text)

    def _request(self, path: str, *, params: dict[str, str], json_body: Any = None,
                 files: dict[str, tuple[str, bytes, str]] | None = None) -> dict[str, Any]:
        """One POST; raises NotSent / NoAnswer for transport failures, returns the JSON answer (errcode unchecked)."""
        if self.budget is not None:
            self.budget.check(self.name)
            self.budget.requests += 1
        url = f"{self.api_base}/cgi-bin/{path}"
        try:
            with http.client(self.timeout_s) as client:
                if files is not None:
                    resp = client.post(url, params=params, files=files)
                else:
                    # ensure_ascii=False: the platform would keep \\uXXXX escapes literally in titles.
                    resp = client.post(url, params=params, content=json.dumps(json_body, ensure_ascii=False).encode(),
                                       headers={"Content-Type": "application/json; charset=utf-8"})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            self._failed(f"{path}: {type(exc).__name__}")
            raise NotSent(f"{path}: {type(exc).__name__}: {self._scrub(str(exc))}") from None
        except httpx.TransportError as exc:
            self._failed(f"{path}: {type(exc).__name__}")
            raise NoAnswer(f"{path}: {type(exc).__name__}: {self._scrub(str(exc)) or 'no answer'}") from None
        if resp.status_code >= 500 or resp.status_code == 429:
            self._failed(f"{path} answered {resp.status_code}")
            raise NoAnswer(f"{path} answered HTTP {resp.status_code}")
        try:
            data = resp.json()
        except ValueError:
            raise ConfigError(f"[publish.wechat] api_base: {path} answered HTTP {resp.status_code} without JSON: "
                              f"{self.api_base} is not the WeChat API") from None
        if not isinstance(data, dict):
            raise CapabilityError(f"wechat {path}: unexpected answer {type(data).__name__}")
        if data.get("errcode") == BUSY:
            self._failed(f"{path}: errcode -1 (system busy)")
        return data

    def _failed(self, detail: str) -> None:
        if self.budget is not None:
            self.budget.failed(detail)

    def _fetch_token(self, force: bool) -> tuple[str, int]:
        body = {"grant_type": "client_credential", "appid": self.appid, "secret": self.secret, "force_refresh": force}
        data = self._with_retries("stable_token", lambda: self._request("stable_token", params={}, json_body=body),
                                  repeatable=True)
        code = int(data.get("errcode") or 0)
        if code:
            raise self._error(code, str(data.get("errmsg", "")), "stable_token", token_call=True)
        try:
            return str(data["access_token"]), int(data["expires_in"])
        except (KeyError, ValueError, TypeError):
            raise CapabilityError("wechat stable_token: answer without access_token/expires_in") from None

    def _with_retries(self, what: str, send: Callable[[], dict[str, Any]], *, repeatable: bool) -> dict[str, Any]:
        """Retry what never reached the platform; repeat an unanswered call only when ``repeatable``."""
        detail = ""
        for attempt in range(self.retries + 1):
            if attempt:
                Backoff(self.retries, self.backoff_s).pause(attempt, None if self._sleep is time.sleep else self._sleep)
            try:
                data = send()
            except NotSent as exc:
                detail = str(exc)
                continue
            except NoAnswer as exc:
                if not repeatable:
                    raise PublishOutcomeUnknown(f"wechat: no answer to {what} ({exc})") from None
                detail = str(exc)
                continue
            if data.get("errcode") == BUSY:
                detail = f"{what}: errcode -1 (system busy)"
                continue
            return data
        raise CapabilityError(f"wechat: {what} failed after {self.retries + 1} attempts: {detail}")

    def _error(self, code: int, msg: str, what: str, token_call: bool = False) -> Exception:
        if code in CREDENTIALS and (token_call or code != 40001):
            return ConfigError(f"[publish.wechat] {what}: errcode {code}: {CREDENTIALS[code]} "
                               f"(appid {self.appid}; see the README's WeChat section)")
        if code == 40001:
            return ConfigError(f"[publish.wechat] {what}: errcode 40001: the platform rejects a freshly issued token: "
                               "check the AppSecret and the account's API permissions")
        if code == QUOTA:
            return PlatformUnavailableError(f"wechat {what}: errcode 45009: the account's daily API quota is spent; "
                                            "not calling it again in this run")
        return WeChatError(code, self._scrub(msg), what)

    def call(self, path: str, *, json_body: Any = None, files: Any = None, query: dict[str, str] | None = None,
             repeatable: bool = True) -> dict[str, Any]:
        """An authenticated API call; a rejected token is refreshed once. Raises on any errcode but 0."""
        token = self.tokens.get()
        for renewed in (False, True):
            # The lambda is called within this iteration, so it sees this iteration's token.
            data = self._with_retries(path, lambda: self._request(path, params={"access_token": token, **(query or {})},  # noqa: B023
                                                                  json_body=json_body, files=files),
                                      repeatable=repeatable)
            code = int(data.get("errcode") or 0)
            if code == 0:
                return data
            if code in TOKEN_INVALID and not renewed:
                log.info("wechat: %s: errcode %d, refreshing the access token", path, code)
                token = self.tokens.rejected(token)
                continue
            raise self._error(code, str(data.get("errmsg", "")), path)
        raise AssertionError("unreachable")

    # --- steps ------------------------------------------------------------------

    def upload_cover(self, seed: str) -> str:
        if self.wc.cover_image:
            path = resolve(self.base_dir, self.wc.cover_image)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ConfigError(f"[publish.wechat] cover_image: cannot read {path}: {exc.strerror}") from None
            name, ctype = path.name, "image/png" if path.suffix.lower() == ".png" else "image/jpeg"
        else:
            data, name, ctype = cover_png(seed), "cover.png", "image/png"
        answer = self.call("material/add_material", query={"type": "image"}, files={"media": (name, data, ctype)})
        return str(answer["media_id"])

    def upload_image(self, src: str) -> str | None:
        """A body image re-hosted on the platform (media/uploadimg), or None when it is not a local file."""
        if not src or urlsplit(src).scheme in ("http", "https", "data"):
            return src if _platform_hosted(src) else None
        path = resolve(self.base_dir, src)
        try:
            data = path.read_bytes()
        except OSError:
            log.warning("wechat: image %s not found; left out of the article", path)
            return None
        ctype = "image/png" if path.suffix.lower() == ".png" else "image/jpeg"
        return str(self.call("media/uploadimg", files={"media": (path.name, data, ctype)})["url"])

    def add_draft(self, article: Article, cover_id: str, key: str = "") -> str:
        """The draft; 阅读原文 (content_source_url) is the configured one, else the article's first web source."""
        digest, content = digest_of(article.body), article_html(article.body, self.upload_image)
        if self.disclosure is not None:
            digest, content = labelled(self.disclosure, article, digest, content, key)
        item = {"title": article.title[:64], "author": self.wc.author[:16], "digest": digest,
                "content": content,
                "content_source_url": self.wc.content_source_url or first_link(article.body), "thumb_media_id": cover_id,
                "need_open_comment": 0, "only_fans_can_comment": 0}
        return str(self.call("draft/add", json_body={"articles": [item]})["media_id"])

    def submit(self, draft_id: str) -> str:
        # Not repeatable: an unanswered submit may have created a task; the ledger's
        # submit_started_at makes recovery look it up before submitting again.
        return str(self.call("freepublish/submit", json_body={"media_id": draft_id}, repeatable=False)["publish_id"])

    def status(self, publish_id: str) -> tuple[int, str | None, str | None, str]:
        """(publish_status, article_url, article_id, fail detail) of a publish task."""
        data = self.call("freepublish/get", json_body={"publish_id": publish_id})
        status = int(data.get("publish_status", -1))
        items = (data.get("article_detail") or {}).get("item") or []
        url = next((str(i["article_url"]) for i in items if isinstance(i, dict) and i.get("article_url")), None)
        fail = f" (fail_idx {data['fail_idx']})" if data.get("fail_idx") else ""
        return status, url, (str(data["article_id"]) if data.get("article_id") else None), fail

    def find_published(self, row: Publication, title: str) -> tuple[Published, bool] | None:
        """The article a lost submit made, and whether it was deleted since: batchget's newest articles,
        matched by this row's cover (uploaded for this publication alone) and title."""
        if not row.cover_id:
            return None
        for page in range(BATCHGET_PAGES):
            data = self.call("freepublish/batchget", json_body={"offset": page * 20, "count": 20, "no_content": 1})
            items = data.get("item") or []
            for item in items:
                for news in (item.get("content") or {}).get("news_item") or []:
                    if news.get("thumb_media_id") == row.cover_id and news.get("title") == title[:64]:
                        found = Published(url=str(news.get("url") or ""), remote_id=str(item.get("article_id")),
                                          key=row.idempotency_key, content_hash=row.content_hash)
                        return found, bool(news.get("is_deleted"))
            if len(items) < 20 or (page + 1) * 20 >= int(data.get("total_count") or 0):
                break
        return None

    # --- the state machine ------------------------------------------------------

    def _update(self, row_id: int, **values: Any) -> Publication:
        with self.ledger.write() as s:
            row = s.get(Publication, row_id)
            for k, v in values.items():
                setattr(row, k, v)
            s.add(row)
        return row

    def advance(self, row_id: int, article: Article, *, poll_budget_s: float,
                verify: Callable[[Published], str | None]) -> Publication:
        """Take the row as far as the platform allows within ``poll_budget_s``; returns it as the ledger holds it.

        ``verify(published)`` is the pipeline's own check of the article URL
        (allowed domains, the URL answers); None when it passes.
        """
        deadline = time.monotonic() + poll_budget_s
        with self.ledger.read() as s:
            row = s.get(Publication, row_id)
        if row.status == PublicationStatus.PENDING and row.submit_started_at is not None and row.publish_id is None:
            row = self._settle_lost_submit(row, article, verify)
            if row.status == PublicationStatus.PENDING and row.submit_started_at is not None:
                return row  # a task may still be publishing: never submit twice
        if row.status == PublicationStatus.PENDING:
            row = self._submit(row, article)
        if row.status == PublicationStatus.SUBMITTED:
            row = self._poll(row, deadline, verify)
        return row

    def _settle_lost_submit(self, row: Publication, article: Article, verify: Callable[[Published], str | None]) -> Publication:
        """A submit whose publish_id was never recorded: adopt the article it made, or wait, or allow a resubmit."""
        lookup = self.find_published(row, article.title)
        if lookup is not None and lookup[1]:
            return self._update(row.id, status=PublicationStatus.FAILED, remote_id=lookup[0].remote_id,
                                verification=f"recovered after crash: the article was published, then {STATUS[5]}")
        if lookup is not None:
            found = lookup[0]
            problem = verify(found)
            return self._update(row.id, status=PublicationStatus.UNVERIFIED if problem else PublicationStatus.VERIFIED, url=found.url,
                                remote_id=found.remote_id, verified_at=None if problem else utcnow(),
                                verification=("recovered after crash (found by freepublish/batchget)"
                                              + (f"; {problem}" if problem else "")))
        waited = utcnow() - aware(row.submit_started_at)
        if waited < timedelta(minutes=self.wc.resubmit_after_min):
            return self._update(row.id, verification=(
                "submit outcome unknown: not among the published articles yet; the task may still be publishing, "
                f"so no resubmission before {self.wc.resubmit_after_min:g} min after the submit"))
        # Long enough for any task to have finished: it failed or never existed. Submit the draft again.
        return self._update(row.id, submit_started_at=None,
                            verification="submit outcome unknown and no article appeared: submitting again")

    def _submit(self, row: Publication, article: Article) -> Publication:
        if not row.cover_id:
            cover = self.upload_cover(row.idempotency_key)
            row = self._update(row.id, cover_id=cover)
        if not row.draft_id:
            draft = self.add_draft(article, row.cover_id, row.idempotency_key)
            row = self._update(row.id, draft_id=draft)
        # From this commit on, a publish task may exist that only batchget can reveal.
        row = self._update(row.id, submit_started_at=utcnow(), verification="submitting")
        try:
            publish_id = self.submit(row.draft_id)
        except PublishOutcomeUnknown as exc:  # sent, unanswered: a task may exist; recovery looks it up
            self._update(row.id, verification=f"outcome unknown: {exc}")
            raise
        except WeChatError as exc:
            # Refused with an errcode: no task. A draft the platform will not publish is replaced next time.
            gone = exc.errcode in (40007, 53503, 53504, 53505)
            self._update(row.id, submit_started_at=None, verification=str(exc),
                         **({"draft_id": None} if gone else {}))
            raise CapabilityError(str(exc)) from None
        except (ConfigError, PlatformUnavailableError, CapabilityError) as exc:
            # Refused credentials, spent quota or budget, or never reached the platform: no task was made.
            self._update(row.id, submit_started_at=None, verification=f"{type(exc).__name__}: {exc}")
            raise
        return self._update(row.id, publish_id=publish_id, status=PublicationStatus.SUBMITTED, submitted_at=utcnow(),
                            verification=f"submitted: publish task {publish_id}")

    def _poll(self, row: Publication, deadline: float, verify: Callable[[Published], str | None]) -> Publication:
        pause = self.wc.poll_interval_s
        while True:
            status, url, article_id, fail = self.status(row.publish_id)
            if status == 0 and url:
                published = Published(url=url, remote_id=article_id, key=row.idempotency_key,
                                      content_hash=row.content_hash)
                problem = verify(published)
                return self._update(row.id, status=PublicationStatus.UNVERIFIED if problem else PublicationStatus.VERIFIED, url=url,
                                    remote_id=article_id, verified_at=None if problem else utcnow(),
                                    verification=f"publish_status 0; {problem}" if problem else "publish_status 0")
            if status in STATUS and status not in (0, 1):
                return self._update(row.id, status=PublicationStatus.FAILED, remote_id=article_id or row.remote_id,
                                    verification=f"publish_status {status}: {STATUS[status]}{fail}")
            left = deadline - time.monotonic()
            if left <= 0:
                return row
            self._sleep(min(pause, left))
            pause = min(pause * 2, MAX_POLL_PAUSE_S)

    def recheck(self, row: Publication) -> Publication:
        """A verified article asked again: deleted (5) or blocked (6) after success makes the row ``removed``."""
        status, _url, _aid, _fail = self.status(row.publish_id)
        if status in REMOVED:
            return self._update(row.id, status=PublicationStatus.REMOVED, verification=f"publish_status {status}: {STATUS[status]}")
        return row

    # The synchronous Publisher protocol, for the callers that use it.

    def publish(self, **_kwargs: Any) -> Published:
        raise CapabilityError("wechat publishes asynchronously: the publish capability drives it through advance()")

    def find(self, *, key: str, slug: str) -> Published | None:
        with self.ledger.read() as s:
            row = s.exec(select(Publication).where(Publication.idempotency_key == key)).first()
        if row is None or not row.url:
            return None
        return Published(url=row.url, remote_id=row.remote_id, key=key, content_hash=row.content_hash)

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        return None


def from_config(publish: PublishConfig, base_dir: Path) -> WeChatPublisher:
    """Entry point ``wechat`` of the ``pipeline.publishers`` group."""
    import os

    wc = publish.wechat
    if not re.fullmatch(r"wx[0-9a-f]{16}", wc.appid or ""):
        raise ConfigError(f"[publish.wechat] appid: {wc.appid!r} is not an appid (wx followed by 16 hex digits; "
                          "公众号 → 设置与开发 → 基本配置)")
    secret = secret_from_env("wechat", "secret_env", wc.secret_env, dict(os.environ))
    api_base = setting_url("wechat", wc.api_base)
    if wc.cover_image and not resolve(base_dir, wc.cover_image).is_file():
        raise ConfigError(f"[publish.wechat] cover_image: {resolve(base_dir, wc.cover_image)} is not a file")
    return WeChatPublisher(publish, base_dir, appid=wc.appid, secret=secret, api_base=api_base)


def first_link(body: str) -> str:
    """The first linked source of the article's 参考资料 list ("" when its sources are all the author's notes)."""
    return next((str(x["url"]) for x in sources_listed(body) if x["url"]), "")
