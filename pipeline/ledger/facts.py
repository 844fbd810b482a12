"""What a fact is: one successful execution and the value a claim can quote from it.

No SQLAlchemy here: the writer (``pipeline.ledger.writer``) and the read commands
(``pipeline.ledger.reader``) build facts with the same function.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Each capability's recorded value, the result key a claim can quote ({"publish": "url", …}). The ledger
# receives the keys instead of importing the layer that declares them: the catalog
# (pipeline.tools.catalog) hands them down when it finds the capabilities.
_KEYS: dict[str, str] = {}
CATALOG = "pipeline.tools.catalog"


def receive_keys(keys: Mapping[str, str]) -> None:
    """Which result key is each capability's fact; called by the catalog with every capability's declaration."""
    _KEYS.update(keys)


def _keys() -> Mapping[str, str]:
    if not _KEYS:
        # Nothing in this process has found the capabilities yet (a read of an earlier run's facts): the
        # catalog is looked up by name, as it looks up the capabilities, and hands the keys down itself.
        importlib.import_module(CATALOG).capabilities()
    return _KEYS


@dataclass(frozen=True)
class Fact:
    """One successful execution and the value it recorded."""

    capability: str
    execution_id: int
    value: Any
    result: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "execution_id": self.execution_id,
            "value": self.value,
            "at": self.at.isoformat() if self.at else None,
        }


def fact_from_execution(capability: str, execution_id: int, result_json: str | None, finished_at: datetime | None) -> Fact:
    result = json.loads(result_json or "{}")
    return Fact(capability, execution_id, result.get(_keys().get(capability, "")), result, finished_at)
