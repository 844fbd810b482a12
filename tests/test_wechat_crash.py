"""Crash safety of the WeChat publish state machine: a kill at each transition never submits twice nor forgets a task.

For every transition, ``PIPELINE_WECHAT_CRASH_ITERATIONS`` (default 6, to keep the
suite fast; ``bench/bench_wechat_crash.py`` runs 20) child processes publish one
article each and are killed (``os._exit(137)``, as
``kill -9`` leaves them) right after the platform answered and before the
ledger heard of it:

* ``wechat_after_cover``, ``wechat_after_draft``: an unused cover or draft on the platform;
* ``wechat_after_submit``: a publish task exists, its publish_id is lost;
* ``wechat_after_published`` / ``wechat_after_failed``: the task finished (status 0 / 3), unrecorded.

Half the crashed attempts are resumed by the same run calling ``publish``
again (the model retrying), half by the next run's ``recover_pending``. Then
the platform and the ledger are audited: every task belongs to exactly one
publication (no duplicate submissions), every task's outcome is in the ledger
(no forgotten task), and no row is left pending or submitted.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from sqlmodel import select

from pipeline.capabilities.publish import publish
from pipeline.errors import PublicationFailed
from pipeline.ledger.models import Publication
from pipeline.publishing.settle import recover_pending

from platforms import add_article, new_context, write_config
from support import CrashWorker
from wechatfake import SECRET, SECRET_ENV, WeChat, wechat_config

# Even, so that half the kills are resumed in-run and half by recovery.
ITERATIONS = 2 * max(1, int(os.environ.get("PIPELINE_WECHAT_CRASH_ITERATIONS", "6")) // 2)
TRANSITIONS = ["wechat_after_cover", "wechat_after_draft", "wechat_after_submit", "wechat_after_published",
               "wechat_after_failed"]

pytestmark = pytest.mark.slow  # each publish runs in a forked worker process


@pytest.fixture(scope="module")
def worker():
    w = CrashWorker()
    yield w
    w.close()


def audit(server: WeChat, ctx) -> dict[str, int]:
    with ctx.ledger.read() as s:
        rows = s.exec(select(Publication)).all()
    by_cover = {r.cover_id: r for r in rows if r.cover_id}
    tasks = list(server.tasks.values())
    per_cover = Counter(t.article["thumb_media_id"] for t in tasks)
    forgotten = 0
    for t in tasks:
        row = by_cover.get(t.article["thumb_media_id"])
        expected = {0: "verified", 3: "failed"}.get(t.status)
        if row is None or row.status != expected or (t.status == 0 and row.url != t.url):
            forgotten += 1
    return {"tasks": len(tasks), "duplicates": sum(n - 1 for n in per_cover.values() if n > 1),
            "forgotten": forgotten, "unsettled": sum(r.status in ("pending", "submitted") for r in rows)}


@pytest.mark.parametrize("fault", TRANSITIONS)
def test_a_kill_at_each_transition_never_submits_twice_nor_forgets(tmp_path, worker, fault, monkeypatch, capsys):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    server = WeChat().start()
    try:
        server.outcome = 3 if fault == "wechat_after_failed" else 0
        config = write_config(tmp_path, "wechat", None,
                              extra=wechat_config(server.base_url, resubmit_after_min=60))
        kills = resumed = 0
        for i in range(ITERATIONS):
            ctx = new_context(config)
            article = add_article(ctx, f"\nIteration {i}.")
            reply = worker.publish(config, ctx.run_id, article.id, {SECRET_ENV: SECRET, "PIPELINE_FAULT": fault})
            assert reply["exit"] == 137, reply
            kills += 1
            if i % 2 == 0:  # the same run retries publish
                try:
                    publish.fn(ctx, article.id)
                except PublicationFailed:
                    assert fault == "wechat_after_failed"
            else:  # the run is over; the next run's recovery settles it
                ctx.ledger.finish_run(ctx.run_id, "crashed", None, "killed")
                if fault in ("wechat_after_cover", "wechat_after_draft"):
                    assert recover_pending(ctx.settings, ctx.ledger) == 1  # never submitted: failed, nothing to find
                else:
                    assert recover_pending(ctx.settings, ctx.ledger) == 1
            resumed += 1
            ctx.ledger.close()
        figures = audit(server, new_context(config))
        submitted_expected = ITERATIONS if fault not in ("wechat_after_cover", "wechat_after_draft") else ITERATIONS // 2
        with capsys.disabled():
            print(f"\nwechat crash fault={fault} kills={kills} resumed={resumed} submits={server.stats()['submits']} "
                  f"tasks={figures['tasks']} duplicates={figures['duplicates']} forgotten={figures['forgotten']} "
                  f"unsettled={figures['unsettled']}")
        assert figures == {"tasks": submitted_expected, "duplicates": 0, "forgotten": 0, "unsettled": 0}
        assert server.stats()["submits"] == submitted_expected
    finally:
        server.stop()
