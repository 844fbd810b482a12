"""Redaction: no configured secret is ever stored, printed, alerted or logged.

Remote systems echo what they were sent (a proxy's 401 body quoting the API
key, an exception naming a URL with its token), so secrets are removed where
text *leaves* the process's memory rather than where it is produced:

* the ledger: a ``before_flush`` hook on every session (``pipeline.ledger.writer``);
* logs: ``LogFilter`` on the CLI's and daemon's handlers;
* terminal output and alerts: ``shown()`` / ``scrub()`` at the print and post;
* tool results sent back to the model (which could otherwise write them into an article).

The secrets are the *values* the config points at (``Config.secrets`` says which):
the variables named by ``api_key_env``, ``password_env``, ``admin_key_env``,
``secret_env`` and ``webhook_url_env``, the configured webhook and ping URLs
themselves, and the token-like parts of those URLs (query values, long path
segments, passwords); ``remember`` takes them.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from .untrusted import visible

if TYPE_CHECKING:
    from ..config import Secrets

MARK = "«redacted»"
# Shorter values would match ordinary text everywhere ("a", "1234"); no real secret is this short.
MIN_LEN = 6

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def add(*values: str | None) -> None:
    """Treat each value as a secret from now on (for the rest of the process)."""
    global _pattern
    new = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_LEN} - _secrets
    if not new:
        return
    with _lock:
        _secrets.update(new)
        # Longest first, so a URL is replaced whole before the token inside it.
        _pattern = re.compile("|".join(re.escape(s) for s in sorted(_secrets, key=len, reverse=True)))


def clear() -> None:
    """Forget every secret (tests)."""
    global _pattern
    with _lock:
        _secrets.clear()
        _pattern = None


def scrub(text: object) -> str:
    """``text`` with every known secret replaced by the marker."""
    s = text if isinstance(text, str) else str(text)
    pattern = _pattern
    return s if pattern is None else pattern.sub(MARK, s)


def scrub_opt(text: str | None) -> str | None:
    return None if text is None else scrub(text)


def shown(text: object) -> str:
    """For plain (non-markup) display: secrets removed, control characters and bidi marks visible."""
    return visible(scrub(text))


def _url_parts(url: str) -> list[str]:
    """A URL and the parts of it that are tokens: query values, long path segments, a password."""
    if not url:
        return []
    parts = [url]
    try:
        split = urlsplit(url)
    except ValueError:
        return parts
    if split.password:
        parts.append(split.password)
    parts += [v for _, v in parse_qsl(split.query) if len(v) >= 8]
    # Slack /services/T…/B…/<token>, Feishu /hook/<uuid>, healthchecks /<uuid>: long mixed segments.
    parts += [seg for seg in split.path.split("/") if len(seg) >= 16 and re.search(r"\d", seg) and re.search(r"[A-Za-z]", seg)]
    return parts


def remember(secrets: Secrets) -> None:
    """Treat the secrets a config names (``Config.secrets``) as secrets from now on."""
    values: list[str | None] = list(secrets.values)
    for url in secrets.urls:
        values += _url_parts(url)
    for url in secrets.shown_urls:  # only the token-like parts of URLs that are otherwise shown
        values += _url_parts(url)[1:]
    add(*values)


class LogFilter(logging.Filter):
    """Formats each record once, then removes secrets and makes control characters visible."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record still gets logged, as its raw msg
            message = str(record.msg)
        # Handlers render exc_info themselves (RichHandler draws its own traceback), past any
        # scrubbing: fold the traceback into the message instead.
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        elif record.exc_text:
            message += "\n" + record.exc_text
        record.exc_text = None
        record.msg, record.args = shown(message), None
        return True


def install_log_filter(handlers: list[logging.Handler] | None = None) -> None:
    """Attach ``LogFilter`` to ``handlers`` (default: the root logger's)."""
    for handler in handlers if handlers is not None else logging.getLogger().handlers:
        if not any(isinstance(f, LogFilter) for f in handler.filters):
            handler.addFilter(LogFilter())
