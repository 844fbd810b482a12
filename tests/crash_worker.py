"""Fork server for the crash test: import the pipeline once, run each publish in a fresh child process.

Why a fork server: importing the pipeline takes over a second, and the crash
test needs dozens of processes that die mid-publish. This process imports
everything but opens nothing (no ledger, no socket, no thread), then forks
one child per request. The child is a separate process with its own ledger
connection and HTTP client, publishes through
``capabilities.publish.publish.fn``, and, with ``PIPELINE_FAULT`` armed
(tests/faults.py), dies by ``os._exit(137)`` at that point, e.g. between the
platform call and the ledger update, as a ``kill -9`` would leave it.

Protocol, one JSON object per line: the test writes
``{"config": path, "run_id": ..., "article_id": ..., "env": {...}}`` to
stdin; this process answers ``{"exit": code, "result": {...} | null,
"error": str | null}`` on stdout. It says ``{"ready": true}`` first.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

import pipeline.tools.prompts  # noqa: E402,F401
from pipeline.capabilities.publish import publish  # noqa: E402
from pipeline.runtime.http import tls as _tls  # noqa: E402

import fakellm  # noqa: E402,F401  (imported here so children do not pay for it)
import faults  # noqa: E402
import platforms  # noqa: E402

_tls()  # load the CA bundle once, before forking, instead of once per child


def child(request: dict, out_fd: int) -> None:
    """Runs in the forked process; never returns."""
    code, reply = 1, {}
    try:
        os.environ.update(request.get("env") or {})
        faults.arm()  # PIPELINE_FAULT, if the request set it
        ctx = platforms.new_context(request["config"], run_id=request["run_id"])
        if request.get("call") == "reconcile":  # what the next run does first, killed where the fault says
            from pipeline import config as config_mod
            from pipeline.publishing.settle import reconcile
            from pipeline.runtime.alerts import Alerter

            alerts = config_mod.load(request["config"], environ={}).alerts
            done = reconcile(ctx.settings, ctx.ledger, Alerter(alerts), channel="default", run_id=ctx.run_id,
                             older_than_min=0)
            reply = {"result": [d.registration_no for d in done]}
        else:
            reply = {"result": publish.fn(ctx, request["article_id"])}
        code = 0
    except BaseException as exc:  # report everything: the test decides what was expected
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    os.write(out_fd, json.dumps(reply).encode())
    os._exit(code)


def serve_one(request: dict) -> dict:
    assert threading.active_count() == 1, "fork only from a single-threaded process"
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child(request, write_fd)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    reply = json.loads(data) if data else {}
    return {"exit": os.waitstatus_to_exitcode(status), "result": reply.get("result"), "error": reply.get("error")}


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(serve_one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
