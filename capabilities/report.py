"""report: the run's report, built from ledger rows only — never from model text.

Stored in the ledger, written as Markdown under ``[report] markdown_dir`` and
posted to the report webhook when one is configured.
"""

from __future__ import annotations

from pipeline.models import Report
from pipeline.reports import deliver, render_run, run_summary
from pipeline.tools import RunContext, capability


@capability
def report(ctx: RunContext) -> dict:
    """Write this run's report from the ledger (topic, title, score, URL, registration). Call it last."""
    summary = run_summary(ctx.ledger, ctx.run_id)
    body = render_run(summary)
    with ctx.ledger.write() as s:
        row = Report(run_id=ctx.run_id, body=body)
        s.add(row)
    return {"report_id": row.id, "report": body, "delivered_to": deliver(ctx.cfg, f"run-{ctx.run_id}", body)}
