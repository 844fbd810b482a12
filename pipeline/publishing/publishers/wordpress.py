"""WordPress: posts through the REST API with an application password.

The API is addressed as ``<site>/?rest_route=/wp/v2/posts``, which WordPress
answers under every permalink setting. ``/wp-json/…`` exists only with
"pretty" permalinks: on a fresh install (plain permalinks, ``?p=123``) a
POST there answers 200 with the front page's HTML and creates nothing, so a
2xx that is not JSON is a configuration error, never "created".

Application passwords (WordPress 5.6+) are sent with HTTP Basic auth; the
password comes from the environment variable named by
``[publish.wordpress] password_env`` and nowhere else. A wrong one makes
WordPress treat the request as an anonymous visitor's: create answers 401
``rest_cannot_create``, the lookup (``status=any&context=edit``) answers
400 ``rest_invalid_param`` / ``rest_forbidden_status``. Both are reported as
the credentials being wrong (exit 2).

The title goes out HTML-escaped: WordPress stores titles as HTML, and for
an administrator (``unfiltered_html``) a ``<script>`` in a model- or
feed-supplied title would be served as markup on the public page.

The idempotency key and content hash travel inside the post as the
attributes of a self-closing block, ``<!-- wp:pipeline/publication {…} /-->``:
the raw content (what ``find`` reads with ``context=edit``) keeps it, while
the public page renders an unknown block as nothing, so the key is not in
public HTML, and content with a block in it is not run through ``wpautop``,
which would wrap a bare comment in an empty first paragraph.

Disclosure (``pipeline.text.disclosure``): the content starts with the visible line, ``<p class="ai-disclosure"
data-aigc="{…}">`` (WordPress keeps ``data-*`` attributes for every role since 5.0), and the block's
attributes carry the same AIGC metadata (``"aigc": {…}``, in the raw content only). WordPress has no
standard field for AI-generated content: post meta is writable over REST only for keys a plugin
registers with ``show_in_rest``, and tags need term ids (a lookup or create per site), so neither is used.

WordPress never answers 409 for a taken slug: it renames the new post
(``slug-2``). That is why the ``publish`` capability asks ``find`` before
posting again after a crash, instead of counting on a conflict.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx

from ...config import PublishConfig
from ...errors import CapabilityError, ConfigError
from ...text.disclosure import Disclosure
from . import Published
from .remote import Document, RemotePublisher, public_url, secret_from_env, setting_url

BLOCK = "pipeline/publication"
_BLOCK = re.compile(r"<!-- wp:pipeline/publication (\{.*?\}) /-->")
# Posts made before the block marker: two plain HTML comments.
_LEGACY_MARKER = re.compile(r"<!-- pipeline-(idempotency-key|content-hash): ([0-9a-f]+) -->")
ROUTE = "/wp/v2/posts"


def markers(doc: Document) -> str:
    fields: dict[str, Any] = {"idempotencyKey": doc.key, "contentHash": doc.content_hash}
    if doc.aigc:
        fields["aigc"] = doc.aigc
    attrs = json.dumps(fields, separators=(",", ":"))
    return f"<!-- wp:{BLOCK} {attrs} /-->\n"


def read_markers(content: str) -> dict[str, str]:
    """{"idempotency-key": …, "content-hash": …} from a post's raw content (either marker form)."""
    m = _BLOCK.search(content or "")
    if m:
        try:
            attrs = json.loads(m.group(1))
        except ValueError:
            attrs = {}
        if isinstance(attrs, dict):
            return {k: str(attrs[a]) for k, a in (("idempotency-key", "idempotencyKey"), ("content-hash", "contentHash"))
                    if isinstance(attrs.get(a), str)}
    return dict(_LEGACY_MARKER.findall(content or ""))


def forbidden_status(resp: httpx.Response) -> bool:
    """The lookup's 400 that means "you are anonymous here": a wrong application password."""
    if resp.status_code != 400:
        return False
    try:
        data = resp.json()
        details = data.get("data", {}).get("details", {}) or {}
        return any(isinstance(d, dict) and d.get("code") == "rest_forbidden_status" for d in details.values()) \
            or "status" in (data.get("data", {}).get("params") or {})
    except (ValueError, AttributeError):
        return False


class WordPressPublisher(RemotePublisher):
    name = "wordpress"

    def __init__(self, url: str, username: str, password: str, status: str, password_env: str = "", **http: Any) -> None:
        super().__init__(secrets=(password,), **http)
        self.api = f"{url}/?rest_route={ROUTE}"
        self.username = username
        self.password_env = password_env
        self.status = status
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"
        self._secrets += (token,)

    def _auth_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        return {"Authorization": self._authorization}

    def _credentials(self, method: str, url: str, status: int, why: str) -> ConfigError:
        where = f"the application password in {self.password_env}" if self.password_env else "the application password"
        return ConfigError(f"[publish.wordpress] {method} {public_url(url)} answered {status} ({why}): WordPress did not "
                           f"accept user {self.username!r} with {where}; create a new application password "
                           "(Users → Profile → Application Passwords) and check [publish.wordpress] username")

    def _refused(self, method: str, url: str, resp: httpx.Response) -> ConfigError:
        if resp.status_code == 403:  # authenticated, but the role may not create or edit posts
            return ConfigError(f"[publish.wordpress] {method} {public_url(url)} answered 403{self._message(resp)}: user "
                               f"{self.username!r} may not publish posts; give it the author, editor or administrator role")
        return self._credentials(method, url, resp.status_code, self._message(resp).strip(" ()") or "unauthorized")

    def _create_request(self, doc: Document) -> tuple[str, str, dict[str, Any]]:
        return "POST", self.api, {"title": html.escape(doc.title, quote=False), "content": markers(doc) + doc.html,
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
        """``GET ?rest_route=/wp/v2/posts&slug=…&status=any&context=edit``: the raw content carries the markers."""
        resp = self._get(self.api, {"slug": slug, "status": "any", "context": "edit"})
        if forbidden_status(resp):
            raise self._credentials("GET", self.api, 400, "rest_forbidden_status: the request was treated as anonymous")
        if resp.status_code == 404:
            return None
        self._check_is_api("GET", self.api, resp)
        if not resp.is_success:
            raise CapabilityError(f"wordpress: looking up slug {slug!r} answered {resp.status_code}{self._message(resp)}")
        posts = self._json(resp, f"looking up slug {slug!r}")
        if not isinstance(posts, list):
            raise CapabilityError(f"wordpress: looking up slug {slug!r} did not answer with a list of posts")
        found = [self._published(p) for p in posts if isinstance(p, dict) and p.get("link")]
        return next((p for p in found if p.key == key), found[0] if found else None)

    @staticmethod
    def _published(post: dict[str, Any]) -> Published:
        content = post.get("content") or {}
        if isinstance(content, dict):
            text = content.get("raw") or content.get("rendered") or ""
        else:
            text = str(content)
        meta = read_markers(text)
        return Published(url=post["link"], key=meta.get("idempotency-key"), content_hash=meta.get("content-hash"),
                         remote_id=str(post.get("id")))


def from_config(publish: PublishConfig, base_dir: Path, environ: dict[str, str] | None = None) -> WordPressPublisher:
    """Entry point ``wordpress`` of the ``pipeline.publishers`` group."""
    wp = publish.wordpress
    url = setting_url("wordpress", wp.url)
    if not wp.username:
        raise ConfigError("[publish.wordpress] username: not set")
    password = secret_from_env("wordpress", "password_env", wp.password_env, dict(os.environ if environ is None else environ))
    publisher = WordPressPublisher(url, wp.username, password, wp.status, password_env=wp.password_env,
                                   timeout_s=publish.timeout_s,
                                   retries=publish.retries, backoff_s=publish.backoff_s)
    publisher.disclosure = Disclosure.of(publish)
    return publisher
