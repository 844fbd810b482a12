"""URL verification: a publication counts only once its URL is allowed and answers.

Two checks, both required: the URL's host is on ``[publish] allowed_domains``
(exact host or a subdomain of one), and a HEAD request (GET when the server
refuses HEAD with 405/501) answers 2xx or 3xx. Redirects are not followed
off the allowlist.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from ..runtime import http


@dataclass(frozen=True)
class Verification:
    ok: bool
    detail: str
    refused: bool = False  # nothing accepted the connection: no answer at all, which is never a verification


def host_allowed(url: str, allowed_domains: list[str]) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return False
    return any(host == d.lower() or host.endswith("." + d.lower()) for d in allowed_domains)


def check_url(url: str, allowed_domains: list[str], timeout_s: float = 5.0) -> Verification:
    if not host_allowed(url, allowed_domains):
        return Verification(False, f"host of {url} is not on [publish] allowed_domains {allowed_domains}")
    try:
        from ..runtime import deadline

        resp = deadline.http(_head_or_get, http.shared(), url, timeout_s, total_s=timeout_s)
    except httpx.HTTPError as exc:
        return Verification(False, f"{url} did not answer: {type(exc).__name__}: {exc}",
                            refused=isinstance(exc, httpx.ConnectError))
    if 200 <= resp.status_code < 400:
        return Verification(True, f"{url} answered {resp.status_code}")
    return Verification(False, f"{url} answered {resp.status_code}")


def _head_or_get(client: httpx.Client, url: str, timeout_s: float) -> httpx.Response:
    resp = client.head(url, timeout=timeout_s)
    if resp.status_code in (405, 501):
        resp = client.get(url, timeout=timeout_s)
    return resp
