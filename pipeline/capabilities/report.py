"""report: the run's report, built from ledger rows only — never from model text.

Stored in the ledger, written as Markdown under ``[report] markdown_dir`` and
posted to the report webhook when one is configured.
"""

from __future__ import annotations

from typing import Any

from pipeline.tools.claims import Lexicon
from pipeline.tools.toolbox import RunContext, capability

LEXICON = Lexicon(
    verbs=(
        "已(汇报|生成报告|发送报告|提交报告)",
        "报告已(生成|发送|提交)",
        r"\b(reports?|summary|recap)\b[^.]{0,25}\b(sent|generated|filed|delivered|written|posted|created|compiled|emailed|mailed|shared)\b",
        r"\b(sent|generated|filed|delivered|wrote|created|put together|compiled|produced|emailed|mailed|shared|forwarded)\b[^.]{0,25}\breports?\b",
        "(总结|汇总)(已经?|也)(发|推送|生成|提交)",
        "已(经)?(发送|生成|提交)(了)?(运行)?(总结|汇总)",
        r"\breported\b",
        r"\breports?\b[^.]{0,25}\b(went|gone) (out|to)\b",
    ),
    zh_step="报告|日报|汇报|周报",
    en_step=r"\breports?\b",
    absorbs_generic=True,  # "报告写好了": generic written/sent verbs are the report's when it is named
)


# The model reads back only the id: the report's path holds the run id, whose digits the embedded model
# once turned into a registration number (CT-20261130-009767) in its final answer.
@capability(order=60, fact="report_id", lexicon=LEXICON, shown=("report_id",))
def report(ctx: RunContext) -> dict[str, Any]:
    """Write this run's report from the ledger (topic, title, score, URL, registration). Call it last."""
    from pipeline.ledger.models import Report
    from pipeline.views.reports import deliver, render_run, run_summary

    summary = run_summary(ctx.ledger, ctx.run_id)
    body = render_run(summary)
    with ctx.ledger.write() as s:
        row = Report(run_id=ctx.run_id, body=body)
        s.add(row)
    delivered = deliver(ctx.settings.report, ctx.settings.base_dir, f"run-{ctx.run_id}", body)
    return {"report_id": row.id, "report": body, "delivered_to": delivered}
