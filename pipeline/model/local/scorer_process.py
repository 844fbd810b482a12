"""The scoring model's llama.cpp server, in a process of its own.

Why not in the run's process, beside the writer's: llama.cpp computes on an OpenMP team per server, and GNU libgomp
cuts its spin-wait to 100 spins once a process has more OpenMP threads than CPUs (``gomp_throttled_spin_count_var``):
with the scorer's team of two beside the writer's on two cores, every barrier of every token the writer decoded for
the rest of the run went through a futex sleep. Replaying a run's twelve writer calls (bench/bench_decoding.py):
20.9 tokens/s alone, 16.8 with the scorer loaded in the same process (0.80x); a one-thread scorer kept the writer at
full speed but took 1.7x as long to score. In a child process the scorer keeps both its threads and the writer its speed.

The child serves llama.cpp's HTTP endpoints on 127.0.0.1 behind a key it reads from its stdin, prints its address,
and exits when its stdin closes: when the parent closes it, exits or is killed, so no scorer outlives its run.

    parent                                   child (python -m pipeline.model.local.scorer_process PATH WINDOW)
    key + "\\n"  -------- stdin -------->     xllamacpp.Server(...)
                 <------- stdout -------     "http://127.0.0.1:PORT\\n"
    close stdin  -------- EOF ---------->     exit
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from ...errors import ConfigError

START_TIMEOUT_S = 120  # loading the scorer reads 400 MB; a slow disk on a cold cache


def server_params(path: str, window: int, key: str) -> Any:
    """The scorer's server: per-token hidden states (embedding mode, pooling none) of a ``window``-token context."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = path
    p.embedding = True
    p.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_NONE
    p.n_ctx = window
    p.load_mode = xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_NONE  # read, not mapped: see provider.server_params
    p.n_batch = p.n_ubatch = window
    p.n_parallel = 1
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for cpu in (p.cpuparams, p.cpuparams_batch):
        cpu.n_threads = threads
        cpu.poll = 0  # see pipeline.model.local.provider: busy-polling starves small machines
    # Per-token embeddings are served only by the native /embedding endpoint (the in-process
    # handle_embeddings is the OpenAI one, which refuses pooling "none"): loopback, a key nobody else has.
    p.hostnames, p.port, p.api_keys = ["127.0.0.1"], 0, [key]
    p.ui = False
    p.endpoint_slots = False
    p.verbosity = -1
    return p


class ScorerProcess:
    """A running child: ``address`` answers llama.cpp's endpoints for ``key``. ``close`` ends it."""

    def __init__(self, path: Path, window: int, key: str) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(path), str(window)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, close_fds=True)
        stdin, stdout, stderr = self._proc.stdin, self._proc.stdout, self._proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None
        self._stdin = stdin
        stdin.write(key + "\n")
        stdin.flush()
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        self.address = line[0].strip() if line else ""
        if not self.address.startswith("http://127.0.0.1:"):
            self.close()
            error = stderr.read().strip().splitlines()
            raise ConfigError(f"scoring model: its server did not start ({path.name}): "
                              f"{error[-1] if error else f'no answer in {START_TIMEOUT_S} s'}")
        # Whatever the child says from now on goes to our stderr, and never fills a pipe it would block on.
        threading.Thread(target=_copy, args=(stderr, sys.stderr), daemon=True).start()

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._stdin.close()
                self._proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()


def _copy(src: IO[str], dst: IO[str]) -> None:
    for text in src:
        dst.write(text)


def main(argv: list[str]) -> int:
    import xllamacpp

    path, window = argv[0], int(argv[1])
    key = sys.stdin.readline().strip()
    server = xllamacpp.Server(server_params(path, window, key))
    sys.stdout.write(server.listening_address + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes it, exits or dies
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
