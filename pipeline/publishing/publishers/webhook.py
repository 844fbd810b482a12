"""Webhook: hand the article to any HTTP endpoint that answers with the URL it published at.

The contract, for whoever writes the receiving end:

* ``POST <url>`` with a JSON document ``{idempotency_key, slug, title,
  markdown, html, content_hash}`` and the header ``Idempotency-Key: <key>``.
  The receiver must treat a repeated key as the same publication (answer the
  first result again), which is what makes resending after a timeout safe.
* It answers 2xx with JSON naming ``url`` (where the article can be fetched).
  409 means the slug is taken; 401/403 means the signature or token is wrong.
* Optional lookup: ``GET <url>?idempotency_key=<key>`` answers 200 with the
  same JSON, or 404 with a JSON body when there is no such publication.
  Receivers without it answer 405/501, or a 404 that is not JSON: the lookup
  then raises ``LookupUnsupported``: a resend relies on the ``Idempotency-Key``,
  and crash recovery records the outcome as *unknown* (never "not published").
* Optional signature: with ``[publish.webhook] secret_env`` set, every
  request carries ``X-Pipeline-Signature: sha256=<hex HMAC-SHA256>`` of the
  request body (of the idempotency key for the lookup, which has no body).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from ...config import PublishConfig
from ...errors import CapabilityError
from ...text.article import sources_listed
from ...text.disclosure import Disclosure
from . import LookupUnsupported, Published
from .remote import Document, RemotePublisher, public_url, secret_from_env, setting_url

SIGNATURE_HEADER = "X-Pipeline-Signature"


def signature(secret: str, payload: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


class WebhookPublisher(RemotePublisher):
    name = "webhook"
    dedupes_creates = True  # the receiver honours Idempotency-Key (see the contract above)

    def __init__(self, url: str, secret: str | None, **http: Any) -> None:
        super().__init__(secrets=(secret or "",), **http)
        self.url = url
        self._secret = secret

    def _auth_headers(self, method: str, url: str, body: bytes) -> dict[str, str]:
        if not self._secret:
            return {}
        if method == "GET":
            body = (parse_qs(urlsplit(url).query).get("idempotency_key") or [""])[0].encode()
        return {SIGNATURE_HEADER: signature(self._secret, body)}

    def _create_request(self, doc: Document) -> tuple[str, str, dict[str, Any]]:
        body: dict[str, Any] = {"idempotency_key": doc.key, "slug": doc.slug, "title": doc.title,
                                "markdown": doc.markdown, "html": doc.html, "content_hash": doc.content_hash}
        if doc.aigc:  # the disclosure: its line leads "html"; the receiver gets the AIGC metadata as well
            body["aigc"] = doc.aigc
        body["sources"] = sources_listed(doc.markdown)  # what the article was written from (also its last section)
        return "POST", self.url, body

    def _created(self, resp: httpx.Response, doc: Document) -> Published:
        data = resp.json()
        if not isinstance(data.get("url"), str):
            raise ValueError("no url")
        return self._published(data, doc.key, doc.content_hash)

    def find(self, *, key: str, slug: str) -> Published | None:
        """The optional ``GET ?idempotency_key=`` lookup: the post, None when the receiver says it has none.

        Raises ``LookupUnsupported`` when the receiver has no lookup: its silence proves nothing.
        """
        resp = self._get(self.url, {"idempotency_key": key})
        unsupported = LookupUnsupported(f"webhook: {public_url(self.url)} offers no lookup (GET answered "
                                        f"{resp.status_code}), so whether it holds the post cannot be known")
        if resp.status_code in (405, 501):
            raise unsupported
        try:
            data = resp.json()
        except ValueError:  # a receiver without the lookup that answers GET with a page
            raise unsupported from None
        if resp.status_code == 404:
            return None  # a JSON 404: the lookup exists and knows no such key
        if not resp.is_success:
            raise CapabilityError(f"webhook: lookup at {public_url(self.url)} answered {resp.status_code}{self._message(resp)}")
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return None
        return self._published(data, key, None)

    @staticmethod
    def _published(data: dict[str, Any], key: str, content_hash: str | None) -> Published:
        # The receiver answered for this key, so the key matches unless it says otherwise.
        return Published(url=data["url"], key=data.get("idempotency_key") or key,
                         content_hash=data.get("content_hash") or content_hash,
                         remote_id=None if data.get("id") is None else str(data["id"]))


def from_config(publish: PublishConfig, base_dir: Path, environ: dict[str, str] | None = None) -> WebhookPublisher:
    """Entry point ``webhook`` of the ``pipeline.publishers`` group."""
    wh = publish.webhook
    url = setting_url("webhook", wh.url)
    secret = None
    if wh.secret_env:
        secret = secret_from_env("webhook", "secret_env", wh.secret_env, dict(os.environ if environ is None else environ))
    publisher = WebhookPublisher(url, secret, timeout_s=publish.timeout_s,
                                 retries=publish.retries, backoff_s=publish.backoff_s)
    publisher.disclosure = Disclosure.of(publish)
    return publisher
