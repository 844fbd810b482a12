"""Token probabilities of a text under the scoring model: what the humanize score is computed from.

llama.cpp's server returns the probabilities of *generated* tokens only. In embedding mode with
pooling ``none`` it returns, for every input token, the final normalised hidden state: the vector
that the output matrix turns into logits. So the hidden states from llama.cpp (quantised, threaded, in a
process of its own: ``scorer_process``) times the output matrix give the whole next-token distribution at
every position. Checked against llama.cpp's own ``n_probs`` for the next token of a sentence: 0.2255 here,
0.2273 there (the quantised matmul's rounding); the top five tokens in the same order.

The output matrix is the GGUF's own Q8_0 tensor (145 MB), read from the file a block of rows at a time and
dequantised into the same float32 values a dense copy would hold: a dense float32 copy was 545 MB of the scorer's
1,337 MB peak, and the tensor memory-mapped was 145 MB more of the process's resident memory once a pass had
touched it (bench/bench_memory.py). A block's logits for every position of the text feed running sums (an
online log-sum-exp), so no position's full distribution is ever held.

Chosen over llama-cpp-python's ``logits_all`` (an sdist: every fresh install compiles llama.cpp) and
over a second runtime: xllamacpp is already the embedded model's runtime, and this route adds numpy
and gguf only.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from . import assets

# llama.cpp embeds a sequence in one micro-batch, and computes the logits of every position of it as well (this
# module reads the hidden states and never those logits): 1.3 MB a token, kept at the longest sequence it has seen
# (616 MB loaded; 1,143 MB after a 400-token paragraph, 1,675 MB after an 800-token one; bench/bench_memory.py).
# So a paragraph is read in windows of WINDOW tokens; after the first, a window's first CONTEXT tokens are context
# for the rest, not predicted again. Of the score corpus's paragraphs, 95 % fit in one window (their scores are
# what a whole-paragraph pass gives); a token further on is predicted from at least CONTEXT tokens before it.
WINDOW = 128
CONTEXT = 64
ROWS = 4096  # output rows (vocabulary entries) per block: 4,096 x 896 float32 = 15 MB, and 4,096 logits a position

_lock = threading.Lock()
_models: dict[str, ScoringModel] = {}


@dataclass(frozen=True)
class TokenStats:
    """Per predicted token of one text (the first token has no prediction).

    ``ll``: log p(token | prefix); ``mean`` and ``var``: the mean and variance of log p under the
    model's own distribution at that position (Fast-DetectGPT's analytic reference); ``logrank``:
    log of the token's rank; ``end``: the byte offset in the UTF-8 text where the token ends.
    """

    ll: Any
    mean: Any
    var: Any
    logrank: Any
    end: Any

    @property
    def n(self) -> int:
        return len(self.ll)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class ScoringModel:
    """The scoring GGUF, loaded once: llama.cpp for hidden states, numpy for the output layer."""

    def __init__(self, path: Path, sha256: str) -> None:
        import importlib.util

        # numpy here, llama.cpp in the scorer's own process
        if importlib.util.find_spec("numpy") is None or importlib.util.find_spec("xllamacpp") is None:
            raise ConfigError(f"scoring model: numpy or the llama.cpp runtime is not installed; run: "
                              f"{assets.INSTALL_HINT}")
        import httpx
        import numpy as np

        from .scorer_process import ScorerProcess

        self.path, self.sha256 = path, sha256
        self._np = np
        self._out = OutputLayer(path)
        key = secrets.token_hex(16)
        self._process = ScorerProcess(path, WINDOW, key)  # in a process of its own: see scorer_process
        self._http = httpx.Client(base_url=self._process.address, timeout=600,
                                  headers={"Authorization": f"Bearer {key}"})

    def tokenize(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and, per token, the byte offset where it ends in ``text.encode()``."""
        reply = self._http.post("/tokenize", json={"content": text, "with_pieces": True})
        reply.raise_for_status()
        ids, ends, at = [], [], 0
        for tok in reply.json()["tokens"]:
            piece = tok["piece"]
            at += len(bytes(piece)) if isinstance(piece, list) else len(piece.encode("utf-8"))
            ids.append(int(tok["id"]))
            ends.append(at)
        return ids, ends

    def stats(self, text: str) -> TokenStats:
        """Per-token statistics of ``text``."""
        return self.stats_many([text])[0]

    def stats_many(self, texts: list[str]) -> list[TokenStats]:
        """Per-token statistics of each text, in one pass over the output matrix: dequantising it costs the
        same for one paragraph as for an article's, so an article is scored at once. The pass is recorded as a
        model call of the running step (a run's model time is the writer's and the scorer's: scoring was ~15 %
        of a run, counted as overhead before)."""
        from .. import calls

        np = self._np
        started = time.perf_counter()
        tokenized = [self.tokenize(text) for text in texts]
        try:
            hidden, targets, counts = [], [], []
            for ids, _ends in tokenized:
                count = 0
                for start, end, skip in windows(len(ids)):
                    hidden.append(self.hidden(ids[start:end])[skip:-1])
                    targets.append(np.asarray(ids[start + skip + 1:end], dtype=np.int64))
                    count += end - start - skip - 1
                counts.append(count)
            if hidden:
                columns = self._positions(np.concatenate(hidden), np.concatenate(targets))
            else:
                columns = tuple(np.zeros(0, dtype=np.float64) for _ in range(4))
            out, at = [], 0
            for (_ids, ends), count in zip(tokenized, counts, strict=True):
                ll, mean, var, logrank = (c[at:at + count] for c in columns)
                out.append(TokenStats(ll, mean, var, logrank, np.asarray(ends[1:1 + count], dtype=np.int64)))
                at += count
            return out
        finally:
            calls.record(f"scorer/{self.path.name}", latency_ms=1000 * (time.perf_counter() - started),
                         prompt_tokens=sum(len(ids) for ids, _ in tokenized))

    def hidden(self, ids: list[int]) -> Any:
        """The final normalised hidden state at each of ``ids`` (one window): logits are these times the output matrix."""
        reply = self._http.post("/embedding", json={"content": ids})
        reply.raise_for_status()
        return self._np.asarray(reply.json()[0]["embedding"], dtype=self._np.float32)

    def _positions(self, hidden: Any, targets: Any) -> tuple[Any, Any, Any, Any]:
        """ll, mean, var and log-rank per position, from running sums over the output matrix's row blocks.

        Per position, with z the logits and m their running maximum: s = sum e^(z-m), a = sum e^(z-m)(z-m) and
        b = sum e^(z-m)(z-m)^2. Then log Z = m + log s, the mean of log p is a/s - log s and its variance
        b/s - (a/s)^2. A new maximum rescales the sums (shifting every z - m by the same d).
        """
        np = self._np
        h = np.ascontiguousarray(hidden, dtype=np.float32)
        targets = np.asarray(targets, dtype=np.int64)
        n = len(targets)
        if n == 0:
            empty = np.zeros(0, dtype=np.float64)
            return empty, empty, empty, empty
        picked, where = np.unique(targets, return_inverse=True)
        target = np.einsum("nd,nd->n", h, self._out.rows(picked)[where])  # each position's own logit
        m = s = a = b = None
        above = np.zeros(n, dtype=np.int64)  # tokens more likely than the target
        for lo in range(0, self._out.vocab, ROWS):
            z = h @ self._out.block(lo, lo + ROWS).T
            hi = lo + z.shape[1]
            top = z.max(axis=1).astype(np.float64)
            new = top if m is None else np.maximum(m, top)
            above += (z > target[:, None]).sum(axis=1)
            own = np.flatnonzero((targets >= lo) & (targets < hi))  # the target itself is never above itself
            above[own] -= z[own, targets[own] - lo] > target[own]
            z -= new.astype(np.float32)[:, None]
            e = np.exp(z)
            es = e.sum(axis=1, dtype=np.float64)
            e *= z
            ea = e.sum(axis=1, dtype=np.float64)
            e *= z
            eb = e.sum(axis=1, dtype=np.float64)
            if m is None:
                s, a, b = es, ea, eb
            else:
                d = m - new
                scale = np.exp(d)
                b = scale * (b + 2 * d * a + d * d * s) + eb
                a = scale * (a + d * s) + ea
                s = scale * s + es
            m = new
        assert m is not None and s is not None and a is not None and b is not None
        log_s = np.log(s)
        mean = a / s - log_s
        var = np.maximum(b / s - (a / s) ** 2, 1e-12)
        ll = target.astype(np.float64) - m - log_s
        return ll, mean, var, np.log(above + 1.0)


def windows(n: int) -> list[tuple[int, int, int]]:
    """How a sequence of ``n`` tokens is read: per window, ``(start, end, skip)``. The hidden states at positions
    ``start + skip`` … ``end - 2`` predict tokens ``start + skip + 1`` … ``end - 1``; the first ``skip`` are context.
    Every token after the first is predicted once, the first window's from all the tokens before it, a later
    window's from at least ``CONTEXT``."""
    out: list[tuple[int, int, int]] = []
    first = 1  # the next token to predict
    while first < n:
        start = max(0, first - 1 - CONTEXT) if out else 0
        end = min(n, start + WINDOW)
        out.append((start, end, first - 1 - start))
        first = end
    return out


_FLOATS = {"F16": "float16", "F32": "float32", "F64": "float64"}


class OutputLayer:
    """The scoring model's output matrix as the GGUF stores it (quantised), rows read from the file and dequantised
    on demand: ``block(lo, hi)`` and ``rows(ids)`` are float32, exactly the values a dense dequantised copy holds.
    Read, not mapped: a pass touches every row, and mapped rows stay in the process's resident memory (145 MB)."""

    def __init__(self, path: Path) -> None:
        import gguf
        import numpy as np

        from . import gguf_header

        found = gguf_header.tensors(path)
        # Tied embeddings: the input matrix is the output matrix.
        tensor = found.get("output.weight") or found["token_embd.weight"]
        self._gguf, self._np = gguf, np
        self._type = gguf.GGMLQuantizationType(tensor.type)
        # As gguf.GGUFReader shapes it: floats as themselves, anything quantised as each row's bytes.
        self._dtype = np.dtype(_FLOATS.get(self._type.name, np.uint8))
        width, self.vocab = tensor.dims[0], tensor.dims[1]  # a row: one vocabulary entry
        block_size, type_size = gguf.GGML_QUANT_SIZES[self._type]
        self._width = width if self._dtype != np.uint8 else width // block_size * type_size
        self._row_bytes = self._width * self._dtype.itemsize
        self._offset = tensor.offset
        self.nbytes = self.vocab * self._row_bytes
        self._fd = os.open(path, os.O_RDONLY)
        # A dense float32 copy earlier versions kept beside the GGUF: 545 MB of disk nothing reads now.
        for stale in (path.with_name(path.name + ".output-f32.npy"), path.with_name(path.name + ".output-f32.npy.sha256")):
            stale.unlink(missing_ok=True)

    def _read(self, lo: int, hi: int) -> Any:
        raw = os.pread(self._fd, (hi - lo) * self._row_bytes, self._offset + lo * self._row_bytes)
        return self._np.frombuffer(raw, dtype=self._dtype).reshape(hi - lo, self._width)

    def block(self, lo: int, hi: int) -> Any:
        return self._dequantize(self._read(lo, min(hi, self.vocab)))

    def rows(self, ids: Any) -> Any:
        return self._dequantize(self._np.concatenate([self._read(int(i), int(i) + 1) for i in ids]))

    def _dequantize(self, raw: Any) -> Any:
        if self._type != self._gguf.GGMLQuantizationType.Q8_0:
            return self._gguf.quants.dequantize(raw, self._type)
        # Q8_0 (the shipped scorer's): blocks of a float16 scale and 32 int8 weights. gguf's own dequantize
        # computes the same values through a per-block-group loop: 1.7 s a pass over the matrix against 0.23 s here.
        import numpy as np

        blocks = raw.reshape(raw.shape[0], -1, 34)
        scale = blocks[..., :2].view(np.float16).astype(np.float32)
        weights = blocks[..., 2:].view(np.int8).astype(np.float32)
        weights *= scale
        return weights.reshape(raw.shape[0], -1)


def scoring_model(path: Path, sha256: str) -> ScoringModel:
    """One loaded scoring model per file per process."""
    key = str(path)
    with _lock:
        if key not in _models:
            _models[key] = ScoringModel(path, sha256)
        return _models[key]
