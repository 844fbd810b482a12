"""Ghost: posts through the Admin API with a short-lived JWT signed by the Admin API key.

The key is ``"<id>:<secret hex>"`` (Ghost Admin → Integrations), read from the
environment variable named by ``[publish.ghost] admin_key_env``. Each request
gets a fresh HS256 token (header ``kid`` = id, ``aud`` = ``/admin/``, valid
five minutes), built with the standard library so no JWT package is needed.

The article goes in as HTML (``?source=html``). Ghost rewrites HTML into its
own format and drops comments, so the idempotency key and content hash ride
in the post's ``codeinjection_head`` as ``<meta>`` tags, which Ghost keeps
verbatim; ``find`` reads them back. Like WordPress, Ghost renames a taken
slug instead of refusing it, so crash recovery relies on ``find``.

Disclosure (``pipeline.text.disclosure``): the HTML starts with the visible line (a paragraph: Ghost's
conversion keeps its text, not necessarily its attributes); ``codeinjection_head`` adds
``<meta name="AIGC" content="{…}">``, which Ghost prints in every page's ``{{ghost_head}}``; and the
post gets the tag ``ai-generated`` (the Admin API creates a tag given by name). Ghost has no field of
its own for AI-generated content.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx

from ...config import PublishConfig
from ...errors import CapabilityError, ConfigError
from ...text.disclosure import CATEGORY, Disclosure
from . import Published
from .remote import Document, RemotePublisher, secret_from_env, setting_url

TOKEN_TTL_S = 300
_META = re.compile(r'<meta name="pipeline-(idempotency-key|content-hash)" content="([0-9a-f]+)">')


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def admin_token(key_id: str, secret: bytes, now: int | None = None) -> str:
    """An Admin API JWT (HS256), as Ghost's own admin-api-schema documents it."""
    iat = int(time.time()) if now is None else now
    header = {"alg": "HS256", "typ": "JWT", "kid": key_id}
    payload = {"iat": iat, "exp": iat + TOKEN_TTL_S, "aud": "/admin/"}
    signing_input = f"{_b64url(json.dumps(header, separators=(',', ':')).encode())}." \
                    f"{_b64url(json.dumps(payload, separators=(',', ':')).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


def split_admin_key(raw: str) -> tuple[str, bytes]:
    """``id:secret`` → (id, secret bytes); ConfigError without echoing the key."""
    key_id, sep, secret_hex = raw.strip().partition(":")
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        secret = b""
    if not sep or not key_id or not secret:
        raise ConfigError("[publish.ghost] admin_key_env: the Admin API key must look like <id>:<hex secret>")
    return key_id, secret


class GhostPublisher(RemotePublisher):
    name = "ghost"

    def __init__(self, url: str, admin_key: str, status: str, **http: Any) -> None:
        super().__init__(secrets=(admin_key,), **http)
        self.api = f"{url}/ghost/api/admin/posts"
        self.status = status
        self._key_id, self._secret = split_admin_key(admin_key)

    def _auth_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        token = admin_token(self._key_id, self._secret)
        return {"Authorization": f"Ghost {token}", "Accept-Version": "v5.0"}

    def _create_request(self, doc: Document) -> tuple[str, str, dict[str, Any]]:
        head = (f'<meta name="pipeline-idempotency-key" content="{doc.key}">'
                f'<meta name="pipeline-content-hash" content="{doc.content_hash}">')
        post: dict[str, Any] = {"title": doc.title, "html": doc.html, "slug": doc.slug, "status": self.status}
        if doc.aigc:
            # The disclosure's metadata: in the page's <head> (ghost_head), and a tag (created by name if new).
            head += f'<meta name="AIGC" content="{html.escape(doc.aigc_json)}">'
            post["tags"] = [{"name": CATEGORY}]
        post["codeinjection_head"] = head
        return "POST", f"{self.api}/?source=html", {"posts": [post]}

    def _created(self, resp: httpx.Response, doc: Document) -> Published:
        post = resp.json()["posts"][0]
        return Published(url=post["url"], key=doc.key, content_hash=doc.content_hash, remote_id=str(post.get("id")))

    def find(self, *, key: str, slug: str) -> Published | None:
        """``GET /posts/slug/<slug>/``; 404 when there is none."""
        resp = self._get(f"{self.api}/slug/{slug}/")
        if resp.status_code == 404:
            return None
        if not resp.is_success:
            raise CapabilityError(f"ghost: looking up slug {slug!r} answered {resp.status_code}{self._message(resp)}")
        data = self._json(resp, f"looking up slug {slug!r}")
        posts = data.get("posts") if isinstance(data, dict) else None
        if not posts or not isinstance(posts[0], dict) or not posts[0].get("url"):
            return None
        post = posts[0]
        meta = dict(_META.findall(post.get("codeinjection_head") or ""))
        return Published(url=post["url"], key=meta.get("idempotency-key"), content_hash=meta.get("content-hash"),
                         remote_id=str(post.get("id")))


def from_config(publish: PublishConfig, base_dir: Path, environ: dict[str, str] | None = None) -> GhostPublisher:
    """Entry point ``ghost`` of the ``pipeline.publishers`` group."""
    gh = publish.ghost
    url = setting_url("ghost", gh.url)
    key = secret_from_env("ghost", "admin_key_env", gh.admin_key_env, dict(os.environ if environ is None else environ))
    publisher = GhostPublisher(url, key, gh.status, timeout_s=publish.timeout_s,
                               retries=publish.retries, backoff_s=publish.backoff_s)
    publisher.disclosure = Disclosure.of(publish)
    return publisher
