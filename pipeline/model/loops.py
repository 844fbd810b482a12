"""A reply stuck in a loop, seen as it streams: the same sentence a third time ends it there.

Small models fall into loops: asked for a 190-word section, the embedded model wrote "We also used a build
tool that was optimized for our specific use case." 26 times, until max_tokens cut it (588 tokens, 32 s of
two cores; bench, 2026-12-03). The draft's repeat removal then deleted all but one, and the part was written
again. Ending the reply where the loop starts keeps what came before it and frees the cores at once.

A loop may change a word each time: "We also ran our builds on different operating systems / time zones /
browsers / devices … to ensure that the improvements were not specific to a particular …", 37 sentences over
two calls, 907 tokens and 42 s, every one deleted afterwards as a repeat (make run, 2026-12-06). So the third
sentence that shares a run of ``RUN`` words (Chinese: characters) with earlier ones of the reply ends it too.
The article's repeat removal deletes such a sentence anyway (``pipeline.text.article.PHRASE``, the same lengths).
"""

from __future__ import annotations

import re

_END = re.compile(r"[。！？]+[”’」）]?|[.!?]+[\"'”’)]?(\s+|$)")  # Chinese needs no space after its full stop
MIN_CHARS = 24   # shorter sentences ("That stung.") may be echoed on purpose
TIMES = 3        # the third time a sentence is said, the reply ends before it
RUN = {"words": 10, "chars": 16}
_UNITS = re.compile(r"[a-z0-9']+|[\u4e00-\u9fff]")


def _runs(key: str) -> set[str]:
    """The sentence's runs of ``RUN`` units: words, or Chinese characters where there are more of those."""
    units = _UNITS.findall(key)
    chinese = sum(len(u) == 1 and u >= "\u4e00" for u in units) * 2 > len(units)
    n = RUN["chars" if chinese else "words"]
    return {" ".join(units[i:i + n]) for i in range(len(units) - n + 1)}


class LoopGuard:
    """Feed it the streamed text; ``looped`` turns true the third time one sentence, or a long run of words
    (``RUN``), is said, and ``text`` is the reply up to where that sentence began."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._scanned = 0       # characters of the reply already split into sentences
        self._counts: dict[str, int] = {}
        self._shared: dict[str, int] = {}  # a run of RUN units -> how many sentences have said it
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
            runs = _runs(key)
            for run in runs:
                self._shared[run] = self._shared.get(run, 0) + 1
            if self._counts[key] >= TIMES or any(self._shared[run] >= TIMES for run in runs):
                self.looped, self._cut_at = True, start
                break
        return self.looped

    @property
    def text(self) -> str:
        text = "".join(self._parts)
        return text[: self._cut_at].rstrip() if self.looped else text
