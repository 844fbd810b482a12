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


def _die() -> None:
    os._exit(137)


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
    if name == "crash_after_platform_call":
        publish = importlib.import_module("pipeline.publishing")

        _after(publish, "_call_platform")
        _after(publish, "_find_earlier", lambda found: found is not None)
    elif name == "crash_after_approval":
        review = importlib.import_module("pipeline.review")

        _before(review, "_complete")
    elif name == "crash_after_reconcile_commit":
        reconcile = importlib.import_module("pipeline.reconcile")

        _after(reconcile, "_register", lambda made: made is not None)
    elif name.startswith("wechat_after_"):
        from pipeline.publishers.wechat import STATUS, WeChatPublisher

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
