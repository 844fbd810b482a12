"""A contract fake of the WeChat Official Account API (公众号), on 127.0.0.1.

Built from the documented behaviour (developers.weixin.qq.com: stable_token,
material/add_material, media/uploadimg, draft/add, freepublish/submit,
freepublish/get, freepublish/batchget, the global error codes):

* every answer is HTTP 200 with JSON; failures carry ``errcode``/``errmsg``;
* ``stable_token`` returns the *same* token while it is valid (normal mode);
  ``force_refresh: true`` issues a new one and the old one stops working;
  wrong appid → 40013, wrong secret → 40125, a caller off the IP allowlist → 40164;
* an API call with an expired token answers 42001, with an unknown or
  superseded one 40001; the daily quota spent answers 45009; ``-1`` is "system busy";
* ``freepublish/submit`` only creates a publish *task*: ``freepublish/get``
  answers ``publish_status`` 1 (publishing) until the task finishes, then
  0 with ``article_detail.item[].article_url``, or 2/3/4 (failed); a published
  article can later be deleted (5) or blocked (6). There is no idempotency key:
  submitting twice makes two articles;
* ``freepublish/batchget`` lists finished, published articles only, newest first, 1–20 per page.

Knobs: ``hold`` (tasks stay publishing until ``release()``), ``outcome``
(the final status of the next tasks), ``expire_token()``, ``quota_spent``,
``ip_allowed``, ``busy_next(n)``, ``remove(article_id, status)``, ``late[route] = seconds``
(the call is done, its answer comes too late), ``expire_after`` (routes after which the token expires).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from platforms import Platform, Reply, Request

APPID = "wx0123456789abcdef"
SECRET = "fake-app-secret-0123456789abcdef"
SECRET_ENV = "PIPELINE_TEST_WECHAT_SECRET"


@dataclass
class Task:
    publish_id: str
    draft_id: str
    article: dict[str, Any]
    status: int = 1  # 1 publishing until finished
    final: int = 0
    article_id: str = ""
    url: str = ""
    finished_at: float = 0.0
    polls: int = 0


@dataclass
class Token:
    value: str
    expires_at: float
    valid: bool = True


@dataclass
class WeChatStats:
    token_calls: int = 0
    forced_refreshes: int = 0
    tokens_issued: int = 0
    submits: int = 0
    drafts: int = 0
    materials: int = 0
    images: int = 0
    errors: dict[int, int] = field(default_factory=dict)


class WeChat(Platform):
    api_prefix = "/cgi-bin/"

    def __init__(self, appid: str = APPID, secret: str = SECRET, token_ttl_s: int = 7200) -> None:
        super().__init__()
        self.appid, self.secret, self.token_ttl_s = appid, secret, token_ttl_s
        self.token: Token | None = None
        self.old_tokens: set[str] = set()
        self.materials: dict[str, bytes] = {}
        self.drafts: dict[str, dict[str, Any]] = {}
        self.tasks: dict[str, Task] = {}
        self.order: list[str] = []  # publish ids, oldest first
        self.counters = WeChatStats()
        self.hold = False
        self.outcome = 0
        self.publish_delay_s = 0.0
        self.quota_spent = False
        self.ip_allowed = True
        self._busy = 0
        self._ids = itertools.count(1)
        self.tokens_seen: list[str] = []
        self.late: dict[str, float] = {}  # route -> seconds: do the work, then answer that late (once)
        self.expire_after: set[str] = set()  # routes after which the token expires (once each)

    # --- knobs ------------------------------------------------------------------

    def release(self) -> None:
        with self.lock:
            self.hold = False

    def expire_token(self) -> None:
        with self.lock:
            if self.token:
                self.token.expires_at = time.time() - 1

    def busy_next(self, n: int = 1) -> None:
        with self.lock:
            self._busy += n

    def remove(self, article_id: str, status: int = 5) -> None:
        """The account deletes (5) or the platform blocks (6) a published article."""
        with self.lock:
            for t in self.tasks.values():
                if t.article_id == article_id:
                    t.status = status

    # --- accounting --------------------------------------------------------------

    def articles(self) -> list[Task]:
        """Tasks that became articles (published, even if removed later)."""
        with self.lock:
            self._advance()
            return [self.tasks[p] for p in self.order if self.tasks[p].status in (0, 5, 6)]

    def stats(self) -> dict[str, Any]:
        with self.lock:
            self._advance()
            per_key: dict[str, int] = {}
            for t in self.tasks.values():
                key = t.article.get("thumb_media_id")
                per_key[key] = per_key.get(key, 0) + 1
            return {"submits": self.counters.submits, "tasks": len(self.tasks),
                    "duplicates": sum(n - 1 for n in per_key.values() if n > 1),
                    "token_calls": self.counters.token_calls, "tokens_issued": self.counters.tokens_issued,
                    "forced_refreshes": self.counters.forced_refreshes, "errors": dict(self.counters.errors)}

    # --- protocol ----------------------------------------------------------------

    def _err(self, code: int, msg: str) -> Reply:
        self.counters.errors[code] = self.counters.errors.get(code, 0) + 1
        return Reply(200, {"errcode": code, "errmsg": msg})

    def handle(self, req: Request) -> Reply:
        if not req.path.startswith(self.api_prefix):
            return self.public(req)
        self.log.append((req.method, req.path))
        self._maybe_sleep(req.method)
        if req.method != "POST":
            return Reply(200, {"errcode": 43002, "errmsg": "require POST method"})
        with self.lock:
            if not self.ip_allowed:
                return self._err(40164, "invalid ip 127.0.0.1, not in whitelist")
            if self._busy:
                self._busy -= 1
                return self._err(-1, "system error")
            route = req.path[len(self.api_prefix):]
            if route == "stable_token":
                return self._stable_token(req)
            problem = self._check_token(req.query.get("access_token"))
            if problem:
                return problem
            if self.quota_spent:
                return self._err(45009, "reach max api daily quota limit")
            handler = {"material/add_material": self._add_material, "media/uploadimg": self._uploadimg,
                       "draft/add": self._draft_add, "freepublish/submit": self._submit,
                       "freepublish/get": self._get, "freepublish/batchget": self._batchget}.get(route)
            if handler is None:
                return Reply(404, "")
            self._advance()
            reply = handler(req)
            delay = self.late.pop(route, 0.0)
            if route in self.expire_after and self.token is not None:
                self.expire_after.discard(route)
                self.token.expires_at = time.time() - 1
        if delay:
            time.sleep(delay)  # the work is done; the client may have given up waiting for the answer
        return reply

    def _stable_token(self, req: Request) -> Reply:
        body = req.json() or {}
        self.counters.token_calls += 1
        if body.get("grant_type") != "client_credential":
            return self._err(40002, "invalid grant_type")
        if body.get("appid") != self.appid:
            return self._err(40013, "invalid appid")
        if body.get("secret") != self.secret:
            return self._err(40125, "invalid appsecret")
        now = time.time()
        force = bool(body.get("force_refresh"))
        if force:
            self.counters.forced_refreshes += 1
        if force or self.token is None or self.token.expires_at <= now:
            if self.token:
                self.old_tokens.add(self.token.value)
            self.token = Token(secrets.token_hex(24), now + self.token_ttl_s)
            self.counters.tokens_issued += 1
        self.tokens_seen.append(self.token.value)
        return Reply(200, {"access_token": self.token.value, "expires_in": int(self.token.expires_at - now)})

    def _check_token(self, token: str | None) -> Reply | None:
        if not token:
            return self._err(41001, "access_token missing")
        if self.token is not None and token == self.token.value:
            if self.token.expires_at <= time.time():
                return self._err(42001, "access_token expired")
            return None
        return self._err(40001, "invalid credential, access_token is invalid or not latest")

    def _multipart_media(self, req: Request) -> bytes | None:
        ctype = req.headers.get("Content-Type", "")
        m = re.search(r"boundary=([^;]+)", ctype)
        if not ctype.startswith("multipart/form-data") or not m:
            return None
        for part in req.body.split(b"--" + m.group(1).strip('"').encode()):
            head, _, data = part.partition(b"\r\n\r\n")
            if b'name="media"' in head and b"filename=" in head:
                return data.rsplit(b"\r\n", 1)[0]
        return None

    def _add_material(self, req: Request) -> Reply:
        if req.query.get("type") != "image":
            return self._err(40004, "invalid media type")
        data = self._multipart_media(req)
        if not data or not (data.startswith(b"\x89PNG") or data.startswith(b"\xff\xd8")):
            return self._err(40005, "invalid file type")
        media_id = f"MAT{next(self._ids):06d}"
        self.materials[media_id] = data
        self.counters.materials += 1
        return Reply(200, {"media_id": media_id, "url": f"http://mmbiz.qpic.cn/mmbiz_png/{media_id}/0"})

    def _uploadimg(self, req: Request) -> Reply:
        data = self._multipart_media(req)
        if not data:
            return self._err(40005, "invalid file type")
        self.counters.images += 1
        return Reply(200, {"url": f"http://mmbiz.qpic.cn/mmbiz_png/IMG{next(self._ids):06d}/0"})

    def _draft_add(self, req: Request) -> Reply:
        articles = (req.json() or {}).get("articles") or []
        if len(articles) != 1:
            return self._err(40003, "invalid articles")
        a = articles[0]
        if not a.get("title") or not a.get("content"):
            return self._err(44003, "empty news data")
        if a.get("thumb_media_id") not in self.materials:
            return self._err(40007, "invalid media_id")
        if re.search(r"<script|javascript:|\son\w+=", a["content"], re.IGNORECASE):
            return self._err(45166, "invalid content")  # the fake is stricter than stripping: a test catches it
        media_id = f"DRAFT{next(self._ids):06d}"
        self.drafts[media_id] = a
        self.counters.drafts += 1
        return Reply(200, {"media_id": media_id})

    def _submit(self, req: Request) -> Reply:
        draft_id = (req.json() or {}).get("media_id")
        if draft_id not in self.drafts:
            return self._err(40007, "invalid media_id")
        publish_id = str(2247483000 + next(self._ids))
        self.tasks[publish_id] = Task(publish_id, draft_id, self.drafts[draft_id], final=self.outcome,
                                      finished_at=time.time() + self.publish_delay_s)
        self.order.append(publish_id)
        self.counters.submits += 1
        return Reply(200, {"errcode": 0, "errmsg": "ok", "publish_id": publish_id, "msg_data_id": publish_id})

    def _advance(self) -> None:
        """Finish the tasks whose time has come (unless held)."""
        if self.hold:
            return
        now = time.time()
        for t in self.tasks.values():
            if t.status == 1 and t.finished_at <= now:
                t.status = t.final
                if t.final == 0:
                    t.article_id = f"ART{t.publish_id}"
                    t.url = f"{self.base_url}/s/{t.article_id}"

    def _get(self, req: Request) -> Reply:
        task = self.tasks.get(str((req.json() or {}).get("publish_id")))
        if task is None:
            return self._err(40007, "invalid publish_id")
        task.polls += 1
        body: dict[str, Any] = {"publish_id": task.publish_id, "publish_status": task.status}
        if task.status in (0, 5, 6) and task.article_id:
            body["article_id"] = task.article_id
        if task.status == 0:
            body["article_detail"] = {"count": 1, "item": [{"idx": 1, "article_url": task.url}]}
        if task.status in (2, 4):
            body["fail_idx"] = [1]
        return Reply(200, body)

    def _batchget(self, req: Request) -> Reply:
        body = req.json() or {}
        offset, count = int(body.get("offset", 0)), int(body.get("count", 0))
        if not 1 <= count <= 20:
            return self._err(40163, "invalid count")
        done = [self.tasks[p] for p in reversed(self.order) if self.tasks[p].status in (0, 5)]
        items = []
        for t in done[offset:offset + count]:
            news = {k: t.article.get(k) for k in ("title", "author", "digest", "content_source_url", "thumb_media_id")}
            if not body.get("no_content"):
                news["content"] = t.article.get("content")
            news.update(url=t.url, is_deleted=t.status == 5)
            items.append({"article_id": t.article_id, "content": {"news_item": [news]}, "update_time": int(time.time())})
        return Reply(200, {"total_count": len(done), "item_count": len(items), "item": items})

    def public(self, req: Request) -> Reply:
        with self.lock:
            task = next((t for t in self.tasks.values() if t.url and req.path == f"/s/{t.article_id}"), None)
        if task is None or task.status != 0:
            return Reply(404, "<h1>Not found</h1>", {"Content-Type": "text/html"})
        return Reply(200, f"<html><body><h1>{task.article.get('title')}</h1></body></html>",
                     {"Content-Type": "text/html"})


def wechat_config(base_url: str, *, poll_budget_s: float = 1.0, resubmit_after_min: float = 60,
                  extra: str = "") -> str:
    """The ``[publish.wechat]`` table for ``platforms.write_config(..., extra=...)``."""
    return f"""
[publish.wechat]
api_base = "{base_url}"
appid = "{APPID}"
secret_env = "{SECRET_ENV}"
poll_budget_s = {poll_budget_s}
poll_interval_s = 0.01
resubmit_after_min = {resubmit_after_min}
{extra}
"""

