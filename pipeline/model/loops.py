"""A reply stuck in a loop, seen as it streams: the same sentence a third time ends it there.

Small models fall into loops: asked for a 190-word section, the embedded model wrote "We also used a build
tool that was optimized for our specific use case." 26 times, until max_tokens cut it (588 tokens, 32 s of
two cores; bench, 2026-12-03). The draft's repeat removal then deleted all but one, and the part was written
again. Ending the reply where the loop starts keeps what came before it and frees the cores at once.
"""

from __future__ import annotations

import re

_END = re.compile(r"[。！？]+[”’」）]?|[.!?]+[\"'”’)]?(\s+|$)")  # Chinese needs no space after its full stop
MIN_CHARS = 24   # shorter sentences ("That stung.") may be echoed on purpose
TIMES = 3        # the third time a sentence is said, the reply ends before it


class LoopGuard:
    """Feed it the streamed text; ``looped`` turns true the third time one sentence is said, and ``text`` is the
    reply up to where that sentence began."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._scanned = 0       # characters of the reply already split into sentences
        self._counts: dict[str, int] = {}
        self.looped = False
        self._cut_at = 0

    def feed(self, piece: str) -> bool:
        if self.looped or not piece:
            return self.looped
        self._parts.append(piece)
        text = "".join(self._parts)
        for m in _END.finditer(text, self._scanned):
            start, self._scanned = self._scanned, m.end()
            key = re.sub(r"[\W_]+", " ", text[start:m.end()].casefold()).strip()
            if len(key) < MIN_CHARS:
                continue
            self._counts[key] = self._counts.get(key, 0) + 1
            if self._counts[key] >= TIMES:
                self.looped, self._cut_at = True, start
                break
        return self.looped

    @property
    def text(self) -> str:
        text = "".join(self._parts)
        return text[: self._cut_at].rstrip() if self.looped else text
