"""The agent's first prompt, read once and kept across runs: llama.cpp saves a slot's KV cache to a file and
restores it in milliseconds.

Every run's first agent turn sends the same ~500 tokens (the system prompt and the tools' schemas, then a task
line that names the day), and the embedded model reads prompts at ~45 tokens/s on 2 cores: 8.8-10.6 s of every run before the
first tool call (make run, 2026-12-05). Saved after that turn and restored before the next run's, the same turn
found 509 of its 510 tokens cached and answered in 0.08 s.

A file is named by what it holds (the request's system turn and tools) and by what made it (the model file's
sha256, the KV cache's type and the context size, the runtime's version): a prompt that changed, or another
model, finds no file and is read and saved anew. llama.cpp compares the restored tokens with the request's and
reuses only their common prefix, so a wrong file could cost speed, never change a reply. The newest ``KEEP`` files
are kept (~8 MB each).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

KEEP = 8
SUFFIX = ".kv"


def first_turn(messages: list[dict[str, Any]]) -> bool:
    """A conversation's first request: its system turn(s) and one user turn, nothing answered yet."""
    return sum(1 for m in messages if m.get("role") != "system") == 1


class SavedPrompts:
    """Slot KV caches saved to and restored from ``directory`` through llama.cpp's ``/slots`` endpoint
    (``client``: an httpx client on the in-process server's loopback listener, with its key)."""

    def __init__(self, directory: Path, client: Any, fingerprint: str) -> None:
        self.directory, self.client, self.fingerprint = directory, client, fingerprint

    def name(self, req: dict[str, Any]) -> str:
        """The file for ``req``'s prompt up to its user turn, which names the day and changes with every run:
        llama.cpp reads again only what follows the part it finds cached."""
        messages = [m for m in req.get("messages") or [] if m.get("role") == "system"]
        held = json.dumps({"messages": messages, **{k: req.get(k) for k in ("tools", "tool_choice", "response_format")}},
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(f"{self.fingerprint}\n{held}".encode()).hexdigest()[:32] + SUFFIX

    def restore(self, slot: int, name: str) -> bool:
        """Load ``name`` into ``slot``; False when there is none, or llama.cpp refused it (the request then reads
        its prompt as it would have)."""
        path = self.directory / name
        if not path.is_file():
            return False
        reply = self.client.post(f"/slots/{slot}?action=restore", json={"filename": name})
        if reply.status_code != 200:
            path.unlink(missing_ok=True)  # written by another build of the runtime: read anew, saved again
            return False
        os.utime(path)  # the newest are kept
        return True

    def save(self, slot: int, name: str) -> None:
        """Write ``slot``'s cache as ``name``: to a temporary name first, so that a run reading it never finds half a file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = f"{name}.{os.getpid()}.part"
        reply = self.client.post(f"/slots/{slot}?action=save", json={"filename": partial})
        if reply.status_code != 200:
            (self.directory / partial).unlink(missing_ok=True)
            return
        os.replace(self.directory / partial, self.directory / name)
        self.prune()

    def prune(self) -> None:
        kept = sorted(self.directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[KEEP:]:
            old.unlink(missing_ok=True)
