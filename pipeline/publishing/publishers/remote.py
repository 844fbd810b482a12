"""What every publisher that talks HTTP to a platform shares: retries, error mapping, adoption.

Creating a post is not idempotent on WordPress or Ghost, so a failed create is
sorted by what the platform may have done before the failure:

* never reached it (connection refused, 429, 503): send again;
* answered with an error (500): it may have saved the post first, so ``find``
  before sending again;
* may still be working on it (read timeout, dropped connection, 502, 504):
  resending could make a second post while the first is still being saved,
  so only ``find`` is retried, unless the platform de-duplicates creates by
  itself (the webhook's ``Idempotency-Key``). When ``find`` never sees it,
  ``PublishOutcomeUnknown`` leaves the ledger row pending for the next
  attempt or ``recover_pending`` to settle.

401/403 is the operator's to fix (``ConfigError``), and so is a 2xx that is
not the API's JSON or a redirect (the URL is not the API's); a 409 (or the platform's
own "duplicate" answer) means the post already exists, so ``find`` it and
adopt it when it carries this idempotency key or content hash. Secrets are
sent only in headers and are scrubbed from any text that goes into an error.

Every request counts against the run's ``AttemptBudget``: once the platform
has failed ``max_failed_attempts`` requests, or ``unavailable_after_s`` has
passed since its first failure, no further request is made and
``PlatformUnavailableError`` (exit 6) ends the run. Without it, a model that
keeps calling ``publish`` against a dead host retries until ``max_turns``.
"""

from __future__ import annotations

import html
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ...errors import CapabilityError, ConfigError, PlatformUnavailableError
from ...runtime import deadline, http
from ...runtime.retry import Backoff
from ...score.scores import detect_language
from ...text.content import to_html
from ...text.disclosure import Disclosure
from . import LookupUnsupported, Published, PublishOutcomeUnknown, same_content

log = logging.getLogger(__name__)

NOT_SENT, ANSWERED, IN_FLIGHT = "not sent", "answered", "in flight"
RETRY_STATUS = {429: NOT_SENT, 503: NOT_SENT, 500: ANSWERED, 502: IN_FLIGHT, 504: IN_FLIGHT}
MAX_PAUSE_S = 10.0


@dataclass(frozen=True)
class Document:
    """The article as every platform receives it."""

    key: str
    slug: str
    title: str
    markdown: str
    content_hash: str
    # The disclosure (pipeline.text.disclosure): its visible paragraph, which leads the HTML, and the AIGC metadata.
    label_html: str = ""
    aigc: dict[str, str] | None = None

    @property
    def html(self) -> str:
        return self.label_html + to_html(self.markdown)

    @property
    def aigc_json(self) -> str:
        return json.dumps(self.aigc, ensure_ascii=False, separators=(",", ":")) if self.aigc else ""


@dataclass(frozen=True)
class Failure:
    """Why one create attempt failed, and whether the platform may hold the post anyway."""

    kind: str
    detail: str

    @property
    def maybe_created(self) -> bool:
        return self.kind != NOT_SENT

    def describe(self) -> str:
        """What happened to the create call, in words that match what the platform did."""
        if self.kind == ANSWERED:
            return f"the create call failed: {self.detail}"
        if self.kind == IN_FLIGHT:
            return f"no answer to the create call ({self.detail})"
        return f"the create call did not reach the platform ({self.detail})"


class AttemptBudget:
    """How many failed requests one run may make to its platform, and for how long after the first.

    Shared by every publisher a run creates (the ``publish`` capability hands
    the run's budget over), so a model calling ``publish`` again and again
    cannot multiply the retries.
    """

    def __init__(self, max_failures: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self.failures = 0
        self.requests = 0
        self.first_failure_at: float | None = None
        self.last_failure = ""

    def remaining_s(self) -> float | None:
        """Seconds left before the platform counts as unavailable; None before any failure."""
        if self.first_failure_at is None:
            return None
        return self.window_s - (self._clock() - self.first_failure_at)

    def check(self, name: str) -> None:
        """Raise PlatformUnavailableError when no further request may be made."""
        left = self.remaining_s()
        if self.failures >= self.max_failures or (left is not None and left <= 0):
            spent = self._clock() - (self.first_failure_at or self._clock())
            raise PlatformUnavailableError(
                f"{name}: platform unavailable: {self.failures} failed request(s) in {spent:.0f}s this run "
                f"(last: {self.last_failure}); not calling it again in this run "
                "([publish] max_failed_attempts, unavailable_after_s)")

    def failed(self, detail: str) -> None:
        self.failures += 1
        self.last_failure = detail
        if self.first_failure_at is None:
            self.first_failure_at = self._clock()


def public_url(url: str) -> str:
    """The URL without user:password@, for messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")))


def setting_url(section: str, url: str) -> str:
    """A configured base URL, checked: http(s) with a host, no trailing slash."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"[publish.{section}] url: not set or not an http(s) URL ({public_url(url)!r})")
    if parts.username is not None or parts.password is not None:
        # URLs end up in logs and error messages; credentials belong in the environment.
        raise ConfigError(f"[publish.{section}] url: must not contain user:password@ ({public_url(url)!r})")
    return url.rstrip("/")


def secret_from_env(section: str, key: str, env_name: str, environ: dict[str, str]) -> str:
    if not env_name:
        raise ConfigError(f"[publish.{section}] {key}: not set (name the environment variable that holds the secret)")
    value = environ.get(env_name, "")
    if not value:
        raise ConfigError(f"[publish.{section}] {key}: environment variable {env_name} is not set")
    return value


class RemotePublisher:
    """Base class: subclasses say how to create, recognise and find a post."""

    name = "remote"
    # True when a repeated create with the same key cannot make a second post (Idempotency-Key).
    dedupes_creates = False

    # The disclosure every post carries (from_config sets it from [publish.disclosure]; None: none).
    disclosure: Disclosure | None = None

    def __init__(self, *, timeout_s: float, retries: int, backoff_s: float, secrets: tuple[str, ...] = ()) -> None:
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._secrets = tuple(s for s in secrets if s)
        # The run's budget of failed requests (set by the publish capability); None: unbounded.
        self.budget: AttemptBudget | None = None

    # --- what subclasses provide --------------------------------------------

    def _auth_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        return {}

    def _create_request(self, doc: Document) -> tuple[str, str, dict[str, Any]]:
        """(method, url, JSON body) of the create call."""
        raise NotImplementedError

    def _created(self, resp: httpx.Response, doc: Document) -> Published:
        raise NotImplementedError

    def _is_duplicate(self, resp: httpx.Response) -> bool:
        return resp.status_code == 409

    def find(self, *, key: str, slug: str) -> Published | None:
        raise NotImplementedError

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        return None  # a remote post is checked over HTTP by the caller

    # --- publish ------------------------------------------------------------

    def document(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Document:
        """The article as this platform gets it: with the disclosure's label and metadata when one is configured."""
        d = self.disclosure
        if d is None:
            return Document(key, slug, title, body_markdown, content_hash)
        aigc = d.aigc(key=key, content_hash=content_hash, propagator=self.name)
        attr = html.escape(json.dumps(aigc, ensure_ascii=False, separators=(",", ":")))
        text = html.escape(d.text(detect_language(title + body_markdown)), quote=False)
        return Document(key, slug, title, body_markdown, content_hash,
                        label_html=f'<p class="ai-disclosure" data-aigc="{attr}">{text}</p>\n', aigc=aigc)

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Published:
        doc = self.document(key=key, slug=slug, title=title, body_markdown=body_markdown, content_hash=content_hash)
        failure: Failure | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                self._pause(attempt, failure)
            if failure and failure.maybe_created:
                found = self._look_for(doc, failure)
                if found is not None:
                    return found
                if failure.kind == IN_FLIGHT and not self.dedupes_creates:
                    continue  # never resend a create the platform may still be saving
            outcome = self._try_create(doc)
            if isinstance(outcome, Published):
                return outcome
            failure = outcome
        assert failure is not None
        if failure.maybe_created:  # one last look: the final attempt may have made the post
            found = self._look_for(doc, failure, final=True)
            if found is not None:
                return found
            if failure.kind == ANSWERED:
                raise CapabilityError(f"{self.name}: publishing failed after {self.retries + 1} attempts "
                                      f"and the post is not there: {failure.detail}")
            raise PublishOutcomeUnknown(
                f"{self.name}: {failure.describe()} and the post was not found; "
                "it may still appear: call publish again later, it will find it instead of posting twice")
        raise CapabilityError(f"{self.name}: publishing failed after {self.retries + 1} attempts: {failure.detail}")

    def _try_create(self, doc: Document) -> Published | Failure:
        method, url, body = self._create_request(doc)
        try:
            resp = self._send(method, url, json_body=body, headers={"Idempotency-Key": doc.key})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            return Failure(NOT_SENT, f"{type(exc).__name__}: {self._scrub(str(exc))}")
        except httpx.TransportError as exc:
            return Failure(IN_FLIGHT, f"{type(exc).__name__}: {self._scrub(str(exc)) or 'no answer'}")
        if resp.status_code in RETRY_STATUS:
            return Failure(RETRY_STATUS[resp.status_code],
                           f"{public_url(url)} answered {resp.status_code}{self._message(resp)}")
        if self._is_duplicate(resp):
            return self._adopt_duplicate(doc, resp)
        self._check_is_api(method, url, resp)
        if not resp.is_success:
            raise CapabilityError(f"{self.name} refused the post: {public_url(url)} answered {resp.status_code}"
                                  f"{self._message(resp)}")
        try:
            return self._created(resp, doc)
        except (ValueError, KeyError, TypeError, IndexError):
            pass
        # Created, by the status, but the answer does not say where: the lookup can.
        found = self.find(key=doc.key, slug=doc.slug)
        if found is None:
            raise CapabilityError(f"{self.name}: {public_url(url)} answered {resp.status_code} "
                                  "but not with the post it created, and the post cannot be found")
        return self._adopt(found, doc)

    def _look_for(self, doc: Document, failure: Failure, final: bool = False) -> Published | None:
        """After a failure that may have created the post: the post, or None when the platform says it is absent."""
        try:
            found = self.find(key=doc.key, slug=doc.slug)
        except LookupUnsupported as exc:
            if not final and self.dedupes_creates:
                return None  # resending is safe: the platform de-duplicates creates by key
            raise PublishOutcomeUnknown(f"{self.name}: no answer to the create call ({failure.detail}), "
                                        f"and {exc}") from None
        except CapabilityError as exc:
            raise PublishOutcomeUnknown(
                f"{self.name}: {failure.describe()}, and the lookup failed too ({exc}); the post may exist: "
                "call publish again later, it will look before posting") from None
        return None if found is None else self._adopt(found, doc)

    def _adopt_duplicate(self, doc: Document, resp: httpx.Response) -> Published:
        found = self.find(key=doc.key, slug=doc.slug)
        if found is None:
            raise CapabilityError(f"{self.name}: slug {doc.slug!r} is taken{self._message(resp)}, "
                                  "and no post with this idempotency key was found")
        return self._adopt(found, doc)

    def _adopt(self, found: Published, doc: Document) -> Published:
        problem = same_content(found, doc.key, doc.content_hash)
        if problem:
            raise CapabilityError(f"{self.name}: slug {doc.slug!r} is taken: {problem}")
        log.info("%s: adopting the existing post %s", self.name, found.url)
        return found

    # --- HTTP ---------------------------------------------------------------

    def _send(self, method: str, url: str, *, json_body: Any = None, params: dict[str, str] | None = None,
              headers: dict[str, str] | None = None) -> httpx.Response:
        """One request. 401/403 raise ConfigError; transport errors propagate.

        Counts against the run's budget: a refused connection, a timeout, a 5xx
        or a 429 is a failed attempt, and once the budget is spent this raises
        PlatformUnavailableError instead of sending.
        """
        timeout = self.timeout_s
        if self.budget is not None:
            self.budget.check(self.name)
            left = self.budget.remaining_s()
            if left is not None:  # a hanging host must not outlast the budget by a whole timeout
                timeout = max(0.5, min(timeout, left))
            self.budget.requests += 1
        # Merged, not replaced: WordPress's URL already carries ?rest_route=.
        target = httpx.URL(url).copy_merge_params(params) if params else url
        request = httpx.Request(method, target, json=json_body)
        request.headers.update(headers or {})
        request.headers.update(self._auth_headers(method, str(request.url), request.content))
        def send() -> httpx.Response:
            with http.client(timeout) as client:
                resp = client.send(request)
                resp.read()
                return resp

        # The timeout bounds the whole request, not each read (a trickling server never trips a read
        # timeout), and a stop request abandons it: the caller then treats the post as possibly made.
        try:
            resp = deadline.http(send, total_s=timeout)
        except httpx.TransportError as exc:
            if self.budget is not None:
                self.budget.failed(f"{method} {type(exc).__name__}")
            raise
        if self.budget is not None and (resp.status_code >= 500 or resp.status_code == 429):
            self.budget.failed(f"{method} answered {resp.status_code}")
        if resp.status_code in (401, 403):
            raise self._refused(method, url, resp)
        return resp

    def _refused(self, method: str, url: str, resp: httpx.Response) -> ConfigError:
        """The error for a 401/403: the operator must fix the credentials (subclasses name them)."""
        return ConfigError(f"[publish.{self.name}] {method} {public_url(url)} answered {resp.status_code}: "
                           f"the platform refused the credentials{self._message(resp)}")

    def _check_is_api(self, method: str, url: str, resp: httpx.Response) -> None:
        """A redirect, or a 2xx that is not JSON, means the URL does not reach the API: the operator's to fix."""
        if resp.is_redirect:
            where = public_url(resp.headers.get("Location", "?"))
            raise ConfigError(f"[publish.{self.name}] url: {method} {public_url(url)} answered {resp.status_code}, "
                              f"a redirect to {where}: set url to the address the site really answers on")
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if resp.is_success and resp.content and not ctype.endswith("json"):
            raise ConfigError(f"[publish.{self.name}] url: {method} {public_url(url)} answered {resp.status_code} "
                              f"with {ctype or 'no content type'}, not the API's JSON: the url is not the "
                              f"{self.name} site's root, or its API is disabled or blocked")

    def _get(self, url: str, params: dict[str, str] | None = None) -> httpx.Response:
        """A read, safe to repeat: retried on 5xx, 429 and transport errors; CapabilityError when they run out."""
        detail = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._pause(attempt, None)
            try:
                resp = self._send("GET", url, params=params)
            except httpx.TransportError as exc:
                detail = f"{type(exc).__name__}: {self._scrub(str(exc)) or 'no answer'}"
                continue
            if resp.status_code in RETRY_STATUS:
                detail = f"answered {resp.status_code}{self._message(resp)}"
                continue
            return resp
        raise CapabilityError(f"{self.name}: looking up {public_url(url)} failed after {self.retries + 1} attempts: {detail}")

    def _json(self, resp: httpx.Response, what: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise CapabilityError(f"{self.name}: {what} answered {resp.status_code} without JSON") from None

    def _pause(self, attempt: int, failure: Failure | None) -> None:
        backoff = Backoff(self.retries, self.backoff_s, cap_s=MAX_PAUSE_S)
        if failure is not None:
            log.warning("%s: %s; retrying in %.2fs (%d/%d)", self.name, failure.detail, backoff.delay(attempt), attempt, self.retries)
        backoff.pause(attempt)

    def _message(self, resp: httpx.Response) -> str:
        """The platform's own error message, short and scrubbed, for the model or the operator."""
        try:
            data = resp.json()
        except ValueError:
            text = resp.text
        else:
            text = _error_text(data)
        if "<" in (text or ""):  # an HTML error page (or HTML inside a JSON message): its words only
            text = html_text(text)
        text = self._scrub(re.sub(r"\s+", " ", text or "")).strip()[:200]
        return f" ({text})" if text else ""

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def html_text(markup: str) -> str:
    """The readable text of an HTML error page: the <title> or first heading when there is one, else all text."""
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", markup)
    for tag in ("h1", "title"):
        m = re.search(rf"(?is)<{tag}\b[^>]*>(.*?)</{tag}>", markup)
        if m and re.sub(r"<[^>]+>", "", m.group(1)).strip():
            markup = m.group(1)
            break
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def _error_text(data: Any) -> str:
    """WordPress {"message"}, Ghost {"errors": [{"message"}]}, or a webhook's {"error"}."""
    if isinstance(data, dict):
        if isinstance(data.get("errors"), list) and data["errors"] and isinstance(data["errors"][0], dict):
            return str(data["errors"][0].get("message") or "")
        for key in ("message", "error", "detail"):
            value = data.get(key)
            if isinstance(value, str):
                return value
    return ""
