"""Token probabilities of a text under the scoring model: what the humanize score is computed from.

llama.cpp's server returns the probabilities of *generated* tokens only. In embedding mode with
pooling ``none`` it returns, for every input token, the final normalised hidden state: the vector
that the output matrix turns into logits. So the hidden states from llama.cpp (quantised, threaded,
in-process) times the output matrix, read once from the GGUF and kept as float32 beside it, give the
whole next-token distribution at every position. Checked against llama.cpp's own ``n_probs`` for the
next token of a sentence: 0.2255 here, 0.2273 there (the quantised matmul's rounding); the top five
tokens in the same order.

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

# llama.cpp embeds a sequence in one micro-batch; longer paragraphs are scored in windows of this.
WINDOW = 1024
_CHUNK = 32  # positions per logits block: 32 x 151,936 float32 = 19 MB at a time

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
        try:
            import numpy as np
            import xllamacpp
        except ImportError:
            raise ConfigError(f"scoring model: numpy or the llama.cpp runtime is not installed; run: "
                              f"{assets.INSTALL_HINT}") from None
        import httpx

        self.path, self.sha256 = path, sha256
        self._np = np
        self._out = _output_matrix(path, sha256)
        p = xllamacpp.CommonParams()
        p.model.path = str(path)
        p.embedding = True
        p.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_NONE
        p.n_ctx = WINDOW
        p.load_mode = xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_NONE  # read, not mapped: see provider.server_params
        p.n_batch = p.n_ubatch = WINDOW
        p.n_parallel = 1
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        for cpu in (p.cpuparams, p.cpuparams_batch):
            cpu.n_threads = threads
            cpu.poll = 0  # see pipeline.model.local.provider: busy-polling starves small machines
        # Per-token embeddings are served only by the native /embedding endpoint (the in-process
        # handle_embeddings is the OpenAI one, which refuses pooling "none"): loopback, a key nobody else has.
        key = secrets.token_hex(16)
        p.hostnames, p.port, p.api_keys = ["127.0.0.1"], 0, [key]
        p.ui = False
        p.endpoint_slots = False
        p.verbosity = -1
        self._server = xllamacpp.Server(p)
        self._http = httpx.Client(base_url=self._server.listening_address, timeout=600,
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
        """Per-token statistics of ``text``; the pass is recorded as a model call of the running step (a run's
        model time is the writer's and the scorer's: scoring was ~15 % of a run, counted as overhead before)."""
        from .. import calls

        started = time.perf_counter()
        ids, ends = self.tokenize(text)
        try:
            return self._stats(ids, ends)
        finally:
            calls.record(f"scorer/{self.path.name}", latency_ms=1000 * (time.perf_counter() - started),
                         prompt_tokens=len(ids))

    def _stats(self, ids: list[int], ends: list[int]) -> TokenStats:
        np = self._np
        parts = []
        # Windows overlap by one token so that every token after the first is predicted once.
        for start in range(0, max(len(ids) - 1, 0), WINDOW - 1):
            window = ids[start:start + WINDOW]
            if len(window) < 2:
                break
            reply = self._http.post("/embedding", json={"content": window})
            reply.raise_for_status()
            hidden = np.asarray(reply.json()[0]["embedding"], dtype=np.float32)
            parts.append(self._positions(hidden[:-1], np.asarray(window[1:])))
        if not parts:
            empty = np.zeros(0, dtype=np.float64)
            return TokenStats(empty, empty, empty, empty, np.zeros(0, dtype=np.int64))
        ll, mean, var, logrank = (np.concatenate([p[i] for p in parts]) for i in range(4))
        return TokenStats(ll, mean, var, logrank, np.asarray(ends[1:1 + len(ll)], dtype=np.int64))

    def _positions(self, hidden: Any, targets: Any) -> tuple[Any, Any, Any, Any]:
        np = self._np
        out = []
        for lo in range(0, len(targets), _CHUNK):
            z = hidden[lo:lo + _CHUNK] @ self._out.T  # float32 logits; sums below accumulate in float64
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            total = p.sum(axis=1, keepdims=True, dtype=np.float64)
            z -= np.log(total).astype(np.float32)  # log-softmax
            p /= total.astype(np.float32)
            pz = p * z
            mean = pz.sum(axis=1, dtype=np.float64)
            var = np.maximum((pz * z).sum(axis=1, dtype=np.float64) - mean * mean, 1e-12)
            tgt = targets[lo:lo + _CHUNK]
            ll = z[np.arange(len(tgt)), tgt]
            rank = (z > ll[:, None]).sum(axis=1) + 1
            out.append((ll, mean, var, np.log(rank)))
        return tuple(np.concatenate([o[i] for o in out]) for i in range(4))


def _output_matrix(path: Path, sha256: str) -> Any:
    """The output layer as float32, dequantised from the GGUF once and memory-mapped after that."""
    import numpy as np

    cache = path.with_name(path.name + ".output-f32.npy")
    stamp = cache.with_name(cache.name + ".sha256")
    try:
        if stamp.read_text().split()[0] == sha256:
            return np.load(cache, mmap_mode="r")
    except (OSError, IndexError, ValueError):
        pass
    import gguf

    reader = gguf.GGUFReader(str(path))
    tensor = next((t for t in reader.tensors if t.name == "output.weight"), None)
    if tensor is None:  # tied embeddings: the input matrix is the output matrix
        tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    matrix = np.ascontiguousarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    tmp = cache.with_name(f".{cache.name}.{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("wb") as fh:
            np.save(fh, matrix)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, cache)
    finally:
        tmp.unlink(missing_ok=True)
    stamp.write_text(f"{sha256}  {path.name}\n")
    return np.load(cache, mmap_mode="r")


def scoring_model(path: Path, sha256: str) -> ScoringModel:
    """One loaded scoring model per file per process."""
    key = str(path)
    with _lock:
        if key not in _models:
            _models[key] = ScoringModel(path, sha256)
        return _models[key]
