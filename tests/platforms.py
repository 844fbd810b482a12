"""Contract servers: WordPress, Ghost and a webhook receiver, faked at the HTTP boundary on 127.0.0.1.

Each fake implements the part of the platform's documented API the
publishers use, strictly enough to catch a wrong request: WordPress checks
HTTP Basic auth against an application password, Ghost verifies the Admin
API JWT (HS256 signature, ``kid``, ``aud``, five-minute lifetime), the
webhook checks its HMAC signature and ``Idempotency-Key``. Posts live in
memory and are served at their public URL for HEAD/GET, so the pipeline's
URL verification runs against them too.

Knobs, to make each platform misbehave the way real ones do:

* ``fail_next(status, times, method)``: answer the next calls with a status
  (401, 409, 500, 503…) without doing anything;
* ``slow(seconds, times)``: sleep before handling, then handle anyway, as a
  server does when the client has already given up;
* ``on_taken_slug``: "rename" (WordPress and Ghost really do this) or
  "conflict" (answer 409);
* webhook only: ``honour_idempotency_key`` and ``lookup`` switches.

``stats()`` counts what matters to the tests: posts, create calls that
stored one, and posts per idempotency key (duplicates).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_WP_MARKER = re.compile(r"<!-- pipeline-(idempotency-key|content-hash): ([0-9a-f]+) -->")
_GHOST_META = re.compile(r'<meta name="pipeline-(idempotency-key|content-hash)" content="([0-9a-f]+)">')


@dataclass
class Request:
    method: str
    target: str  # the request line's path and query, as sent
    path: str
    query: dict[str, str]
    headers: Any
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, (bytes, str)):
            return self.body.encode() if isinstance(self.body, str) else self.body
        return json.dumps(self.body).encode()


@dataclass
class Post:
    id: int
    slug: str
    status: str
    key: str | None
    content_hash: str | None
    url: str
    data: dict[str, Any]


class Platform:
    """The server, the store and the knobs; subclasses implement one platform's routes."""

    api_prefix = "/"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.posts: list[Post] = []
        self.creates = 0
        self.log: list[tuple[str, str]] = []
        self.on_taken_slug = "rename"
        self._failures: list[tuple[str, int]] = []
        self._slow: tuple[float, int | None, tuple[str, ...]] = (0.0, 0, ())
        self._server: ThreadingHTTPServer | None = None

    # --- knobs ----------------------------------------------------------------

    def fail_next(self, status: int, times: int = 1, method: str = "POST") -> None:
        with self.lock:
            self._failures += [(method, status)] * times

    def slow(self, seconds: float, times: int | None = None, methods: tuple[str, ...] = ("POST", "GET")) -> None:
        """Sleep ``seconds`` before the next ``times`` API calls (None: all of them)."""
        with self.lock:
            self._slow = (seconds, times, methods)

    # --- lifecycle ------------------------------------------------------------

    def start(self) -> Platform:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # A short poll: shutdown() waits up to one interval, and most tests stop a platform.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # --- accounting -----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        with self.lock:
            per_key = Counter(p.key for p in self.posts)
            return {"posts": len(self.posts), "creates": self.creates, "per_key": dict(per_key),
                    "duplicates": sum(n - 1 for n in per_key.values() if n > 1)}

    def wait_for_posts(self, n: int, timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.posts) >= n:
                return True
            time.sleep(0.02)
        return False

    # --- dispatch -------------------------------------------------------------

    def handle(self, req: Request) -> Reply:
        is_api = req.path.startswith(self.api_prefix)
        if is_api:
            self.log.append((req.method, req.path))
            self._maybe_sleep(req.method)
            failed = self._take_failure(req.method)
            if failed:
                return Reply(failed, self.error_body(failed, "injected failure"))
            if not self.authorized(req):
                return Reply(401, self.error_body(401, "authentication failed"))
            return self.api(req)
        return self.public(req)

    def _maybe_sleep(self, method: str) -> None:
        with self.lock:
            seconds, times, methods = self._slow
            if not seconds or method not in methods or times == 0:
                return
            if times is not None:
                self._slow = (seconds, times - 1, methods)
        time.sleep(seconds)

    def _take_failure(self, method: str) -> int | None:
        with self.lock:
            for i, (m, status) in enumerate(self._failures):
                if m == method:
                    del self._failures[i]
                    return status
        return None

    def public(self, req: Request) -> Reply:
        """The public site: a published post's page, else 404."""
        with self.lock:
            post = next((p for p in self.posts if _target(p.url) == req.target), None)
        if post is None or post.status not in ("publish", "published", "live"):
            return Reply(404, "<h1>Not found</h1>", {"Content-Type": "text/html"})
        return Reply(200, f"<html><body><h1>{post.data.get('title')}</h1></body></html>", {"Content-Type": "text/html"})

    def store(self, slug: str, status: str, key: str | None, content_hash: str | None, url_for, data: dict) -> Post:
        """Save a post under a free slug (renaming as the real platforms do), counting the create."""
        with self.lock:
            taken = {p.slug for p in self.posts}
            final, n = slug, 2
            while final in taken:
                final, n = f"{slug}-{n}", n + 1
            post = Post(len(self.posts) + 1, final, status, key, content_hash, "", data)
            post.url = url_for(post)
            self.posts.append(post)
            self.creates += 1
            return post

    def slug_taken(self, slug: str) -> bool:
        with self.lock:
            return any(p.slug == slug for p in self.posts)

    # --- per platform ---------------------------------------------------------

    def authorized(self, req: Request) -> bool:
        return True

    def api(self, req: Request) -> Reply:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> Any:
        return {"message": message, "status": status}


def _target(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _handler(platform: Platform):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            reply = platform.handle(Request(method, self.path, parts.path, query, self.headers, body))
            data = reply.encode()
            try:
                self.send_response(reply.status)
                ctype = reply.headers.get("Content-Type", "application/json")
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    if k != "Content-Type":
                        self.send_header(k, v)
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): the work above is done regardless

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler


# --- WordPress ----------------------------------------------------------------

DB_DOWN_PAGE = ("<!DOCTYPE html><html><head><title>Database Error</title></head><body>"
                "<h1>Error establishing a database connection</h1></body></html>")


class WordPress(Platform):
    """The REST API's posts route with application passwords (HTTP Basic), as WordPress 6.1 really answers.

    Checked against a real WordPress (tests/test_wordpress_real.py):

    * the API is at ``/?rest_route=/wp/v2/posts`` under every permalink
      setting; ``/wp-json/…`` only with pretty permalinks, and with plain ones
      (``permalinks = "plain"``, a fresh install's default) it is the front
      page: 200, HTML, nothing created;
    * a wrong application password is an anonymous visitor: create answers
      401 ``rest_cannot_create``, a lookup with ``status=any`` 400
      ``rest_invalid_param`` / ``rest_forbidden_status``;
    * links follow the permalink setting (``?p=ID``, ``/YYYY/MM/DD/slug/``,
      ``/slug/``);
    * titles are stored as HTML: verbatim for a user with ``unfiltered_html``
      (``role = "administrator"``), tags stripped for an author; the public
      page serves the stored title as it is;
    * content without blocks goes through ``wpautop`` (a bare HTML comment
      becomes an empty paragraph); a block comment renders as nothing;
    * ``database_down``: 500, HTML for a page, WordPress's JSON ``wp_die``
      (the message still HTML) for a JSON request.
    """

    api_prefix = "/wp-json/"

    def __init__(self, username: str = "editor", password: str = "abcd efgh ijkl mnop qrst uvwx") -> None:
        super().__init__()
        self.username, self.password = username, password
        self.permalinks = "plain"  # plain | date | postname
        self.role = "administrator"  # administrator (unfiltered_html) | author
        self.database_down = False
        self.api_blocked = False  # a security plugin or proxy that hides the REST API: every URL is a page
        self.redirect_to = ""  # a site that moved (http -> https, www): every request answers 301 there

    def _api_route(self, req: Request) -> str | None:
        if self.api_blocked:
            return None
        if "rest_route" in req.query:
            return req.query["rest_route"]
        if self.permalinks != "plain" and req.path.startswith("/wp-json/"):
            return req.path[len("/wp-json"):]
        return None

    def handle(self, req: Request) -> Reply:
        route = self._api_route(req)
        if self.redirect_to:
            return Reply(301, "", {"Location": self.redirect_to + req.target, "Content-Type": "text/html"})
        if self.database_down:
            if route is not None and "json" in req.headers.get("Content-Type", ""):
                return Reply(500, {"code": "wp_die", "message": "<h1>Error establishing a database connection</h1>",
                                   "data": {"status": 500}})
            return Reply(500, DB_DOWN_PAGE, {"Content-Type": "text/html; charset=UTF-8"})
        if route is None:
            return self.public(req)
        self.log.append((req.method, f"rest:{route}"))
        self._maybe_sleep(req.method)
        failed = self._take_failure(req.method)
        if failed:
            return Reply(failed, self.error_body(failed, "injected failure"))
        if route.rstrip("/") != "/wp/v2/posts":
            return Reply(404, self.error_body(404, "No route was found matching the URL and request method."))
        if req.method == "GET":
            return self._list(req)
        if req.method == "POST":
            return self._create(req)
        return Reply(405, self.error_body(405, "method not allowed"))

    def authorized(self, req: Request) -> bool:
        expected = "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return hmac.compare_digest(req.headers.get("Authorization", ""), expected)

    def error_body(self, status: int, message: str) -> Any:
        code = {401: "rest_cannot_create", 409: "duplicate_slug"}.get(status, "rest_error")
        return {"code": code, "message": message, "data": {"status": status}}

    def _create(self, req: Request) -> Reply:
        if not self.authorized(req):  # an anonymous visitor, as far as WordPress can tell
            return Reply(401, self.error_body(401, "Sorry, you are not allowed to create posts as this user."))
        doc = req.json()
        if not isinstance(doc, dict) or not doc.get("title") or not doc.get("content"):
            return Reply(400, self.error_body(400, "title and content are required"))
        slug = doc.get("slug") or re.sub(r"\W+", "-", doc["title"].lower())
        if self.on_taken_slug == "conflict" and self.slug_taken(slug):
            return Reply(409, self.error_body(409, f"slug {slug} already exists"))
        meta = read_wp_markers(doc["content"])
        status = doc.get("status", "draft")
        title = doc["title"] if self.role == "administrator" else re.sub(r"<[^>]*>", "", doc["title"])
        base = self.base_url
        permalinks = self.permalinks

        def url_for(p: Post) -> str:
            if status != "publish" or permalinks == "plain":
                return f"{base}/?p={p.id}"
            if permalinks == "date":
                return f"{base}/{time.strftime('%Y/%m/%d')}/{p.slug}/"
            return f"{base}/{p.slug}/"

        post = self.store(slug, status, meta.get("idempotency-key"), meta.get("content-hash"), url_for,
                          {**doc, "title": title})
        return Reply(201, self._json(post))

    def _list(self, req: Request) -> Reply:
        if req.query.get("status") == "any" and req.query.get("context") != "edit":
            return Reply(400, self.error_body(400, "status=any needs context=edit"))
        if req.query.get("status") == "any" and not self.authorized(req):
            return Reply(400, {"code": "rest_invalid_param", "message": "Invalid parameter(s): status",
                               "data": {"status": 400, "params": {"status": "Status is forbidden."},
                                        "details": {"status": {"code": "rest_forbidden_status",
                                                               "message": "Status is forbidden.",
                                                               "data": {"status": 401}}}}})
        with self.lock:
            posts = [p for p in self.posts if p.slug == req.query.get("slug")] if "slug" in req.query else list(self.posts)
        if req.query.get("status") != "any":
            posts = [p for p in posts if p.status == "publish"]
        return Reply(200, [self._json(p) for p in posts])

    def public(self, req: Request) -> Reply:
        with self.lock:
            if "p" in req.query:
                post = next((p for p in self.posts if str(p.id) == req.query["p"]), None)
            else:
                post = next((p for p in self.posts if _target(p.url) == req.target), None)
        if (req.path == "/" and "p" not in req.query) or (post is None and req.path.startswith("/wp-json/")):
            # The front page (and, with plain permalinks, anything under /wp-json/).
            return Reply(200, "<!DOCTYPE html><html><head><title>Site</title></head><body>front page</body></html>",
                         {"Content-Type": "text/html; charset=UTF-8"})
        if post is None or post.status != "publish":
            return Reply(404, "<h1>Not found</h1>", {"Content-Type": "text/html"})
        page = (f'<html><body><h1 class="wp-block-post-title">{post.data["title"]}</h1>'
                f'<div class="entry-content">{render_wp_content(post.data["content"])}</div></body></html>')
        return Reply(200, page, {"Content-Type": "text/html; charset=UTF-8"})

    @staticmethod
    def _json(p: Post) -> dict:
        return {"id": p.id, "slug": p.slug, "status": p.status, "link": p.url,
                "title": {"raw": p.data["title"], "rendered": p.data["title"]},
                "content": {"raw": p.data["content"], "rendered": render_wp_content(p.data["content"])}}


def read_wp_markers(content: str) -> dict[str, str]:
    m = re.search(r"<!-- wp:pipeline/publication (\{.*?\}) /-->", content)
    if m:
        attrs = json.loads(m.group(1))
        return {"idempotency-key": attrs.get("idempotencyKey"), "content-hash": attrs.get("contentHash")}
    return dict(_WP_MARKER.findall(content))


def render_wp_content(content: str) -> str:
    """What the_content makes of stored content: blocks render (an unknown one as nothing), else wpautop."""
    if "<!-- wp:" in content:
        return re.sub(r"<!-- /?wp:[^>]*?-->\n?", "", content)
    # wpautop: a run of lines that are bare comments becomes a paragraph of its own (an empty one, to a reader).
    return re.sub(r"\A((?:<!--.*?-->\n)+)", lambda m: "<p>" + m.group(1).rstrip("\n").replace("\n", "<br />\n") + "</p>\n",
                  content)


# --- Ghost --------------------------------------------------------------------


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class Ghost(Platform):
    """``/ghost/api/admin/posts/`` with Admin API key JWTs."""

    api_prefix = "/ghost/api/admin/"

    def __init__(self, key_id: str = "6489a1b2c3d4e5f6a7b8c9d0",
                 secret_hex: str = "a" * 16 + "0123456789abcdef" * 3) -> None:
        super().__init__()
        self.key_id, self.secret = key_id, bytes.fromhex(secret_hex)
        self.admin_key = f"{key_id}:{secret_hex}"

    def authorized(self, req: Request) -> bool:
        scheme, _, token = req.headers.get("Authorization", "").partition(" ")
        return scheme == "Ghost" and self._token_ok(token)

    def _token_ok(self, token: str) -> bool:
        try:
            h, p, sig = token.split(".")
            header, payload = json.loads(_b64url_decode(h)), json.loads(_b64url_decode(p))
            expected = hmac.new(self.secret, f"{h}.{p}".encode(), hashlib.sha256).digest()
            now = time.time()
            return (hmac.compare_digest(_b64url_decode(sig), expected) and header.get("alg") == "HS256"
                    and header.get("kid") == self.key_id and payload.get("aud") == "/admin/"
                    and payload["iat"] - 60 <= now < payload["exp"] and payload["exp"] - payload["iat"] <= 300)
        except (ValueError, KeyError, TypeError):
            return False

    def error_body(self, status: int, message: str) -> Any:
        kind = {401: "UnauthorizedError", 404: "NotFoundError", 409: "ValidationError"}.get(status, "InternalServerError")
        return {"errors": [{"message": message, "type": kind}]}

    def api(self, req: Request) -> Reply:
        path = req.path.rstrip("/") + "/"
        m = re.fullmatch(r"/ghost/api/admin/posts/slug/([^/]+)/", path)
        if m and req.method == "GET":
            with self.lock:
                post = next((p for p in self.posts if p.slug == m.group(1)), None)
            return Reply(200, {"posts": [self._json(post)]}) if post else Reply(404, self.error_body(404, "Post not found."))
        if path == "/ghost/api/admin/posts/" and req.method == "POST":
            return self._create(req)
        return Reply(404, self.error_body(404, "Resource not found"))

    def _create(self, req: Request) -> Reply:
        doc = req.json()
        posts = doc.get("posts") if isinstance(doc, dict) else None
        if not posts or not isinstance(posts[0], dict) or not posts[0].get("title"):
            return Reply(422, self.error_body(422, "posts[0].title is required"))
        if req.query.get("source") != "html" and "html" in posts[0]:
            return Reply(422, self.error_body(422, "html needs ?source=html"))
        post_in = posts[0]
        slug = post_in.get("slug") or re.sub(r"\W+", "-", post_in["title"].lower())
        if self.on_taken_slug == "conflict" and self.slug_taken(slug):
            return Reply(409, self.error_body(409, f"slug {slug} already exists"))
        meta = dict(_GHOST_META.findall(post_in.get("codeinjection_head") or ""))
        status = post_in.get("status", "draft")
        base = self.base_url

        def url_for(p: Post) -> str:
            return f"{base}/{p.slug}/" if status == "published" else f"{base}/p/{p.id:08d}/"

        post = self.store(slug, status, meta.get("idempotency-key"), meta.get("content-hash"), url_for, post_in)
        return Reply(201, {"posts": [self._json(post)]})

    @staticmethod
    def _json(p: Post) -> dict:
        return {"id": f"{p.id:024x}", "slug": p.slug, "status": p.status, "url": p.url, "title": p.data["title"],
                "html": p.data.get("html"), "codeinjection_head": p.data.get("codeinjection_head")}


# --- webhook ------------------------------------------------------------------


class Webhook(Platform):
    """The receiver described in pipeline/publishing/publishers/webhook.py."""

    api_prefix = "/hook"

    def __init__(self, secret: str | None = None) -> None:
        super().__init__()
        self.secret = secret
        self.honour_idempotency_key = True
        self.lookup = True
        self.on_taken_slug = "conflict"

    @property
    def url(self) -> str:
        return f"{self.base_url}/hook"

    def authorized(self, req: Request) -> bool:
        if not self.secret:
            return True
        signed = req.body if req.method == "POST" else req.query.get("idempotency_key", "").encode()
        expected = "sha256=" + hmac.new(self.secret.encode(), signed, hashlib.sha256).hexdigest()
        return hmac.compare_digest(req.headers.get("X-Pipeline-Signature", ""), expected)

    def error_body(self, status: int, message: str) -> Any:
        return {"error": message}

    def api(self, req: Request) -> Reply:
        if req.method == "GET":
            if not self.lookup:
                return Reply(405, self.error_body(405, "no lookup here"))
            with self.lock:
                post = next((p for p in self.posts if p.key == req.query.get("idempotency_key")), None)
            return Reply(200, self._json(post)) if post else Reply(404, self.error_body(404, "unknown key"))
        if req.method != "POST":
            return Reply(405, self.error_body(405, "method not allowed"))
        doc = req.json()
        key = req.headers.get("Idempotency-Key")
        if not isinstance(doc, dict) or not key or doc.get("idempotency_key") != key:
            return Reply(400, self.error_body(400, "Idempotency-Key header must equal idempotency_key"))
        if self.honour_idempotency_key:
            with self.lock:
                earlier = next((p for p in self.posts if p.key == key), None)
            if earlier:
                return Reply(200, self._json(earlier))
        if self.on_taken_slug == "conflict" and self.slug_taken(doc["slug"]):
            return Reply(409, self.error_body(409, f"slug {doc['slug']} is taken"))
        base = self.base_url
        post = self.store(doc["slug"], "live", key, doc.get("content_hash"), lambda p: f"{base}/published/{p.slug}", doc)
        return Reply(201, self._json(post))

    @staticmethod
    def _json(p: Post) -> dict:
        return {"id": p.id, "url": p.url, "idempotency_key": p.key, "content_hash": p.content_hash}


# --- pointing the pipeline at a platform ----------------------------------------

SECRET_ENV = {"wordpress": "PIPELINE_TEST_WP_PASSWORD", "ghost": "PIPELINE_TEST_GHOST_KEY",
              "webhook": "PIPELINE_TEST_HOOK_SECRET"}
HOOK_SECRET = "whsec-test-not-a-real-secret"


def make_platform(target: str) -> Platform | None:
    """A started contract server for ``target`` (None for the local site, which needs none)."""
    kinds = {"wordpress": WordPress, "ghost": Ghost, "webhook": lambda: Webhook(HOOK_SECRET)}
    return kinds[target]().start() if target in kinds else None


def secret_of(platform: Platform | None) -> str:
    if isinstance(platform, WordPress):
        return platform.password
    if isinstance(platform, Ghost):
        return platform.admin_key
    if isinstance(platform, Webhook):
        return platform.secret or ""
    return ""


def secret_env(target: str, platform: Platform | None) -> dict[str, str]:
    """The environment a process needs to publish to ``platform``: the secret, under its variable."""
    return {SECRET_ENV[target]: secret_of(platform)} if target in SECRET_ENV else {}


def write_config(directory, target: str, platform: Platform | None, *, timeout_s: float = 3.0, retries: int = 2,
                 backoff_s: float = 0.01, extra: str = ""):
    """A config file whose [publish] section points at ``platform``; returns its path."""
    base = platform.base_url if platform else ""
    path = directory / "config.toml"
    path.write_text(f"""
[ledger]
url = "sqlite:///{directory}/ledger.db"

[publish]
target = "{target}"
timeout_s = {timeout_s}
retries = {retries}
backoff_s = {backoff_s}
verify_timeout_s = 3

[publish.local]
dir = "{directory}/site"
base_url = "http://127.0.0.1:8765"  # nothing listens: the check serves the site itself

[publish.wordpress]
url = "{base}"
username = "editor"
password_env = "{SECRET_ENV['wordpress']}"

[publish.ghost]
url = "{base}"
admin_key_env = "{SECRET_ENV['ghost']}"

[publish.webhook]
url = "{base}/hook"
secret_env = "{SECRET_ENV['webhook']}"
{extra}
""", encoding="utf-8")
    return path


def new_context(config_path, run_id: str | None = None):
    """A RunContext on the config's ledger: a new run, or an existing ``run_id``."""
    from pipeline import config
    from pipeline.ledger.writer import Ledger
    from pipeline.tools.prompts import Prompts
    from pipeline.tools.toolbox import RunContext

    cfg = config.load(config_path, environ={})
    ledger = Ledger(cfg.ledger_url)
    return RunContext(run_id or ledger.start_run("m").id, cfg.run_settings(), ledger, llm=None, prompts=Prompts())


def add_article(ctx, suffix: str = ""):
    """A humanized article that passes the threshold, as humanize would have stored it."""
    from pipeline.ledger.models import Article
    from pipeline.score.scoring import score
    from pipeline.text.content import content_hash

    from fakellm import HUMANIZED

    text = HUMANIZED + suffix
    title, body = text.split("\n", 1)[0].lstrip("# "), text.split("\n", 1)[1].strip()
    with ctx.ledger.write() as session:
        article = Article(run_id=ctx.run_id, kind="humanized", title=title, body=body, language="en",
                          content_hash=content_hash(title, body), score=score(text).total)
        session.add(article)
    return article
