"""WordPress: posts through the REST API (``/wp-json/wp/v2/posts``) with an application password.

Application passwords (WordPress 5.6+) are sent with HTTP Basic auth; the
password comes from the environment variable named by
``[publish.wordpress] password_env`` and nowhere else. The idempotency key
and content hash travel inside the post as two HTML comments, which
WordPress keeps (block markup is made of such comments), so ``find`` can
tell this article's post from another one with the same slug.

WordPress never answers 409 for a taken slug: it renames the new post
(``slug-2``). That is why the ``publish`` capability asks ``find`` before
posting again after a crash, instead of counting on a conflict.
"""

from __future__ import annotations

import base64
import os
import re

import httpx

from ..config import Config
from ..errors import CapabilityError, ConfigError
from . import Published
from .remote import Document, RemotePublisher, secret_from_env, setting_url

_MARKER = re.compile(r"<!-- pipeline-(idempotency-key|content-hash): ([0-9a-f]+) -->")


def markers(doc: Document) -> str:
    return (f"<!-- pipeline-idempotency-key: {doc.key} -->\n"
            f"<!-- pipeline-content-hash: {doc.content_hash} -->\n")


class WordPressPublisher(RemotePublisher):
    name = "wordpress"

    def __init__(self, url: str, username: str, password: str, status: str, **http) -> None:
        super().__init__(secrets=(password,), **http)
        self.api = f"{url}/wp-json/wp/v2/posts"
        self.status = status
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"
        self._secrets += (token,)

    def _auth_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        return {"Authorization": self._authorization}

    def _create_request(self, doc: Document):
        return "POST", self.api, {"title": doc.title, "content": markers(doc) + doc.html,
                                  "status": self.status, "slug": doc.slug}

    def _created(self, resp: httpx.Response, doc: Document) -> Published:
        post = resp.json()
        return Published(url=post["link"], key=doc.key, content_hash=doc.content_hash, remote_id=str(post.get("id")))

    def _is_duplicate(self, resp: httpx.Response) -> bool:
        """409, or a 400 whose error code says the post exists (plugins that forbid duplicate slugs)."""
        if resp.status_code == 409:
            return True
        try:
            code = str(resp.json().get("code", ""))
        except (ValueError, AttributeError):
            return False
        return resp.status_code == 400 and ("exists" in code or "duplicate" in code)

    def find(self, *, key: str, slug: str) -> Published | None:
        """``GET /posts?slug=…&status=any&context=edit``: the raw content carries the markers."""
        resp = self._get(self.api, {"slug": slug, "status": "any", "context": "edit"})
        if resp.status_code == 404:
            return None
        if not resp.is_success:
            raise CapabilityError(f"wordpress: looking up slug {slug!r} answered {resp.status_code}{self._message(resp)}")
        posts = self._json(resp, f"looking up slug {slug!r}")
        if not isinstance(posts, list):
            raise CapabilityError(f"wordpress: looking up slug {slug!r} did not answer with a list of posts")
        found = [self._published(p) for p in posts if isinstance(p, dict) and p.get("link")]
        return next((p for p in found if p.key == key), found[0] if found else None)

    @staticmethod
    def _published(post: dict) -> Published:
        content = post.get("content") or {}
        if isinstance(content, dict):
            text = content.get("raw") or content.get("rendered") or ""
        else:
            text = str(content)
        meta = dict(_MARKER.findall(text))
        return Published(url=post["link"], key=meta.get("idempotency-key"), content_hash=meta.get("content-hash"),
                         remote_id=str(post.get("id")))


def from_config(cfg: Config, environ: dict[str, str] | None = None) -> WordPressPublisher:
    """Entry point ``wordpress`` of the ``pipeline.publishers`` group."""
    wp = cfg.publish.wordpress
    url = setting_url("wordpress", wp.url)
    if not wp.username:
        raise ConfigError("[publish.wordpress] username: not set")
    password = secret_from_env("wordpress", "password_env", wp.password_env, dict(os.environ if environ is None else environ))
    return WordPressPublisher(url, wp.username, password, wp.status, timeout_s=cfg.publish.timeout_s,
                              retries=cfg.publish.retries, backoff_s=cfg.publish.backoff_s)
