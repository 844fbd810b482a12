"""``pipeline ledger diff``: what the model claimed beside what the ledger holds.

Each claim keeps the verdict the guard gave it *when it was made*: a
"published" written before any publish ran stays ``unbacked`` even if a nudge
later made the model publish for real. The diff is the hallucination set of
the run, caught or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ledger import Ledger
    from .reader import LedgerReader


def run_diff(ledger: Ledger | LedgerReader, run_id: str | None) -> dict[str, Any] | None:
    """``ledger``: a Ledger or a LedgerReader (same read methods)."""
    run = ledger.get_run(run_id)
    if run is None:
        return None
    # A claim repeated across nudged turns is one claim, made in several turns.
    grouped: dict[tuple, dict[str, Any]] = {}
    for c in ledger.claims(run.id):
        key = (c.capability, c.value, c.status, c.text)
        entry = grouped.setdefault(key, {"capability": c.capability, "text": c.text, "value": c.value,
                                         "status": c.status, "turn_ids": []})
        entry["turn_ids"].append(c.turn_id)
    claims = list(grouped.values())
    # Why a failed run ended: the guard's final decision (hallucination, incomplete, text_tool_call, stuck).
    ends = [g.kind for g in ledger.guard_events(run.id) if g.action == "fail"]
    facts = ledger.facts(run.id)
    for claim in claims:
        # What the ledger recorded for the claimed capability, shown beside a mismatching value.
        claim["recorded"] = [f.value for f in facts if f.capability == claim["capability"] and f.value is not None]
    return {
        "run_id": run.id,
        "status": run.status,
        "exit_code": run.exit_code,
        "nudges": run.nudges,
        "reason": ends[-1] if ends else None,
        "claims": claims,
        "facts": [f.as_dict() for f in facts],
        "hallucinations": [c for c in claims if c["status"] != "verified"],
    }
