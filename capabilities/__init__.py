"""The six capabilities, one module each. Tool name = capability name = ledger name."""

from __future__ import annotations

from pipeline.tools import Capability

from .draft import draft
from .humanize import humanize
from .publish import publish
from .register import register
from .report import report
from .topic import topic

ALL: list[Capability] = [topic, draft, humanize, publish, register, report]

__all__ = ["ALL", "topic", "draft", "humanize", "publish", "register", "report"]
