"""What a long-lived process keeps across runs: one model client and one ledger per configuration.

A daemon's pool worker or a Celery worker runs many channels; loading the model (the embedded
one is hundreds of MB) or opening a ledger (engine, pool, schema check) once per process instead
of once per run is most of what makes a scheduled run cheap.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import LLMConfig
    from ..ledger.writer import Ledger
    from ..model.llm import ChatModel

_lock = threading.Lock()
_models: dict[tuple[str, str | None, str | None], ChatModel] = {}
_ledgers: dict[str, Ledger] = {}


def model_for(llm: LLMConfig, state_dir: Path) -> ChatModel:
    """This process's client of ``[llm]``'s model (its data, the embedded model's weights, under ``state_dir``)."""
    from ..model.llm import ChatModel

    key = (llm.model, llm.api_base, llm.api_key_env)
    with _lock:
        if key not in _models:
            _models[key] = ChatModel(llm, data_dir=state_dir)
        return _models[key]


def ledger_for(url: str, busy_timeout_ms: int) -> Ledger:
    """This process's ledger at ``url`` (``Config.ledger_url``), opened at the first ask."""
    from ..ledger.writer import Ledger

    with _lock:
        if url not in _ledgers:
            _ledgers[url] = Ledger(url, busy_timeout_ms)
        return _ledgers[url]


def checkpoint_all() -> None:
    """Fold each open SQLite ledger's WAL back into its file (a worker stopping, or between runs): a copy
    of ``ledger.db`` or an immutable reader then sees every row. Never raises: it is housekeeping."""
    with _lock:
        ledgers = list(_ledgers.values())
    for ledger in ledgers:
        try:
            ledger.checkpoint()
        except Exception:  # a ledger that cannot be reached now is checkpointed next time
            pass
