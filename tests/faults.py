"""Crash points for the crash tests, armed from outside the production code.

``PIPELINE_FAULT=<name>`` in a test process's environment, then ``arm()``, makes that process die
by ``os._exit(137)`` (no cleanup, no commit: what a ``kill -9`` leaves) at the named point. Each
point wraps the production function whose return (or call) marks it, so the pipeline itself has
no fault hooks:

* ``crash_after_platform_call``: the platform holds the post, the ledger does not know
  (after ``_call_platform`` returns, or after ``_find_earlier`` adopted an earlier post);
* ``crash_after_approval``: the review is approved, its publish not started;
* ``crash_after_reconcile_commit``: a reconciliation's registration committed, its alert not sent;
* ``wechat_after_cover``, ``wechat_after_draft``, ``wechat_after_submit``: after that WeChat call
  answered, before the ledger recorded it; ``wechat_after_published`` / ``wechat_after_failed``:
  the publish task's status (0 / 3) came back, unrecorded.

* the step boundaries in ``STEPS`` (``before_topic`` … ``after_report``), for killing a worker mid-run;
  with ``PIPELINE_FAULT_ONCE=<path>`` only the first process to reach the point dies, and with
  ``PIPELINE_FAULT_SCOPE=group`` it takes its whole process group along (a worker's parent and children).

Processes that cannot be given code (``pipeline`` CLI runs) start as ``python tests/faults.py ARGS``:
it arms the point named in the environment, then runs the CLI with ARGS.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

ENV = "PIPELINE_FAULT"


ONCE_ENV = "PIPELINE_FAULT_ONCE"  # a path: the fault fires only in the process that creates it
SCOPE_ENV = "PIPELINE_FAULT_SCOPE"  # "group": the whole process group dies (a worker's parent and children)

# Step boundaries of a run, for the fault bench and the worker tests (see ``_step``).
STEPS = ("before_topic", "after_draft", "after_humanize", "after_verified", "after_register", "after_report")


def _die() -> None:
    once = os.environ.get(ONCE_ENV)
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # fired already: this process (a redelivery, a restarted worker) lives on
    if os.environ.get(SCOPE_ENV) == "group":
        import signal

        os.killpg(os.getpgrp(), signal.SIGKILL)  # parent and children at once, as an OOM kill or a power cut
    os._exit(137)


def _step(name: str) -> None:
    """``before_topic``: the topic capability is about to run; ``after_X``: X's execution committed ok;
    ``after_verified``: the publication row committed ``verified`` (before publish's execution closes)."""
    from pipeline.ledger.writer import Ledger

    if name == "after_verified":
        publishing = importlib.import_module("pipeline.publishing.publish")
        _after(publishing, "_settle", lambda row: row.status == "verified")
    elif name == "before_topic":
        opened = Ledger.open_execution

        @functools.wraps(opened)
        def open_execution(self: Any, run_id: str, turn: Any, call_id: Any, capability: str, arguments: str) -> Any:
            if capability == "topic":
                _die()
            return opened(self, run_id, turn, call_id, capability, arguments)

        Ledger.open_execution = open_execution  # type: ignore[method-assign]
    else:
        step = name.removeprefix("after_")
        closed = Ledger.close_execution

        @functools.wraps(closed)
        def close_execution(self: Any, ex: Any, ok: bool, *args: Any, **kwargs: Any) -> Any:
            closed(self, ex, ok, *args, **kwargs)
            if ok and ex.capability == step:
                _die()

        Ledger.close_execution = close_execution  # type: ignore[method-assign]


def _after(owner: Any, attr: str, when: Callable[[Any], bool] = lambda _result: True) -> None:
    """Die once ``owner.attr`` returns a result for which ``when`` holds."""
    original = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if when(result):
            _die()
        return result

    setattr(owner, attr, wrapper)


def _before(owner: Any, attr: str) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _die()

    setattr(owner, attr, wrapper)


def arm(name: str | None = None) -> None:
    """Arm ``name`` (default: ``$PIPELINE_FAULT``) in this process; nothing when neither is set."""
    name = name if name is not None else os.environ.get(ENV)
    if not name:
        return
    if name in STEPS:
        _step(name)
    elif name == "crash_after_platform_call":
        publish = importlib.import_module("pipeline.publishing.publish")

        _after(publish, "_call_platform")
        _after(publish, "_find_earlier", lambda found: found is not None)
    elif name == "crash_after_approval":
        review = importlib.import_module("pipeline.publishing.review")

        _before(review, "_complete")
    elif name == "crash_after_reconcile_commit":
        reconcile = importlib.import_module("pipeline.publishing.settle")

        _after(reconcile, "_number_publication", lambda made: made is not None)
    elif name.startswith("wechat_after_"):
        from pipeline.publishing.publishers.wechat import STATUS, WeChatPublisher

        call = {"wechat_after_cover": "upload_cover", "wechat_after_draft": "add_draft",
                "wechat_after_submit": "submit"}.get(name)
        if call is not None:
            _after(WeChatPublisher, call)
        elif name == "wechat_after_published":
            _after(WeChatPublisher, "status", lambda r: r[0] == 0 and bool(r[1]))
        elif name == "wechat_after_failed":
            _after(WeChatPublisher, "status", lambda r: r[0] in STATUS and r[0] not in (0, 1))
        else:
            raise ValueError(f"unknown fault {name!r}")
    else:
        raise ValueError(f"unknown fault {name!r}")


if __name__ == "__main__":  # python tests/faults.py run --config ...: the CLI with the fault armed
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    arm()
    from pipeline.cli import main

    sys.argv[0] = "pipeline"
    main()
