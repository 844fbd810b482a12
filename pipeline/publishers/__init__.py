"""Publishers: where an article goes. Each returns the URL it was published at.

A publisher does the external side effect and nothing else; idempotency keys,
verification and ledger rows are the ``publish`` capability's job, so every
target gets them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..config import Config
from ..errors import ConfigError


@dataclass(frozen=True)
class Published:
    url: str
    # A check the publisher can make itself before the HTTP check (e.g. the file on disk).
    local_check: str | None = None


class Publisher(Protocol):
    name: str

    def publish(self, *, key: str, slug: str, title: str, body_markdown: str, content_hash: str) -> Published: ...

    def verify_local(self, published: Published, content_hash: str) -> str | None:
        """Return None when the publication is present where it was written, else why not."""
        ...


def get_publisher(cfg: Config) -> Publisher:
    if cfg.publish.target == "local":
        from .local import LocalSitePublisher

        return LocalSitePublisher(cfg.path(cfg.publish.local.dir), cfg.publish.local.base_url)
    raise ConfigError(f"[publish] target: unknown publisher {cfg.publish.target!r} (known: local)")
