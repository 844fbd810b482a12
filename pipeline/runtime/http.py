"""The one way this package gets an HTTP client: one TLS context and one shared client per process.

Building a TLS context loads the CA bundle (~40 ms of CPU); every client would pay it again.
Redirects are never followed: a redirect from an API is a misconfiguration to report, not to obey.
"""

from __future__ import annotations

import functools
import ssl
import threading

import httpx

_shared: httpx.Client | None = None
_shared_lock = threading.Lock()


@functools.cache
def tls() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def client(timeout_s: float | httpx.Timeout) -> httpx.Client:
    """A client of its own (closed by the caller): for requests that must not share a connection pool."""
    return httpx.Client(timeout=timeout_s, follow_redirects=False, verify=tls())


def shared() -> httpx.Client:
    """The process's shared client, for short checks; pass a timeout per request."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = httpx.Client(follow_redirects=False, verify=tls())
        return _shared
