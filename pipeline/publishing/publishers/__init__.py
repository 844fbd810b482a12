"""Publishers: where an article goes. Each returns the URL it was published at.

A publisher does the external side effect and nothing else; idempotency keys,
verification and ledger rows are the ``publish`` capability's job, so every
target gets them the same way.

Publishers are plugins: ``[publish] target`` names an entry point in the
``pipeline.publishers`` group whose object is a factory ``(publish, base_dir) -> Publisher``: the ``[publish]``
section and the directory its relative paths resolve against (the config file's).
The built-in targets are also listed in ``BUILTIN`` so they resolve even when
the installed package metadata predates them (an editable install that was
not reinstalled after pyproject.toml changed).

Errors a publisher raises say who must act: ``ConfigError`` when the operator
must (bad credentials, missing settings), ``CapabilityError`` when the call
failed for good, and ``PublishOutcomeUnknown`` when the request may have
reached the platform but no answer came back, so only ``find`` can tell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Protocol

from ...config import PublishConfig
from ...errors import CapabilityError, ConfigError

log = logging.getLogger(__name__)

GROUP = "pipeline.publishers"

# Used when the entry point is missing from the installed metadata.
BUILTIN = {
    "local": "pipeline.publishing.publishers.local:from_config",
    "wordpress": "pipeline.publishing.publishers.wordpress:from_config",
    "ghost": "pipeline.publishing.publishers.ghost:from_config",
    "webhook": "pipeline.publishing.publishers.webhook:from_config",
    "wechat": "pipeline.publishing.publishers.wechat:from_config",
}


@dataclass(frozen=True)
class Published:
    url: str
    # A check the publisher can make itself before the HTTP check (e.g. the file on disk).
    local_check: str | None = None
    # What the platform says it holds, when it can tell: lets a found post be matched to a key.
    key: str | None = None
    content_hash: str | None = None
    remote_id: str | None = None


class PublishOutcomeUnknown(CapabilityError):
    """The request may have reached the platform, but no answer came back: ask ``find``."""


class LookupUnsupported(CapabilityError):
    """The platform offers no way to look a post up: whether it holds one cannot be known from here."""


class Publisher(Protocol):
    name: str

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Published: ...

    def find(self, *, key: str, slug: str) -> Published | None:
        """An earlier publication with this idempotency key (or slug), or None: crash recovery asks this."""
        ...

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        """Return None when the publication is present where it was written, else why not."""
        ...


def same_content(found: Published, key: str, content_hash: str) -> str | None:
    """None when a found publication is this article, else why it is not.

    The key already includes the content hash, so a key match is a content
    match; without a key, the hash the platform holds must equal ours.
    """
    if found.key is not None and found.key != key:
        return f"{found.url} belongs to another publication (idempotency key differs)"
    if found.content_hash is not None and found.content_hash != content_hash:
        return f"{found.url} holds different content (content hash differs)"
    if found.key is None and found.content_hash is None:
        return f"{found.url} carries no idempotency key or content hash to match"
    return None


def known_targets() -> list[str]:
    names = set(BUILTIN)
    try:
        names.update(ep.name for ep in metadata.entry_points(group=GROUP))
    except Exception:  # broken metadata must not hide the built-ins
        pass
    return sorted(names)


def _factory(target: str) -> Callable[[PublishConfig, Path], Publisher]:
    try:
        found = list(metadata.entry_points(group=GROUP, name=target))
    except Exception as exc:
        log.warning("reading %s entry points failed: %s", GROUP, exc)
        found = []
    if len(found) > 1:
        log.warning("several %s entry points named %r; using %s", GROUP, target, found[0].value)
    spec = found[0].value if found else BUILTIN.get(target)
    if spec is None:
        raise ConfigError(f"[publish] target: unknown publisher {target!r} (known: {', '.join(known_targets())})")
    try:
        factory: Callable[[PublishConfig, Path], Publisher] = metadata.EntryPoint(name=target, value=spec, group=GROUP).load()
        return factory
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"[publish] target: publisher {target!r} ({spec}) cannot be loaded: {exc}") from None


def get_publisher(publish: PublishConfig, base_dir: Path, target: str | None = None) -> Publisher:
    """The publisher for ``target`` (default ``[publish] target``); ConfigError if unknown or misconfigured.

    ``base_dir``: where the section's relative paths resolve (the config file's directory).
    """
    return _factory(target or publish.target)(publish, base_dir)
