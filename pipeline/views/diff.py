"""``pipeline ledger diff``: what the model claimed beside what the ledger holds.

Each claim keeps the verdict the guard gave it *when it was made*: a
"published" written before any publish ran stays ``unbacked`` even if a nudge
later made the model publish for real. The diff is the hallucination set of
the run, caught or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ledger.reader import LedgerReader
    from ..ledger.writer import Ledger

from ..ledger.facts import Fact
from ..states import Grounded, Verdict


@dataclass(frozen=True)
class DiffClaim:
    """One claim, made in one or more turns (a claim repeated across nudged turns is one claim)."""

    capability: str
    text: str
    value: str | None
    status: str
    turn_ids: list[int | None]
    # What the ledger recorded for the claimed capability, shown beside a mismatching value.
    recorded: list[Any]

    def as_dict(self) -> dict[str, Any]:
        return {"capability": self.capability, "text": self.text, "value": self.value, "status": self.status,
                "turn_ids": list(self.turn_ids), "recorded": list(self.recorded)}


@dataclass(frozen=True)
class Unsourced:
    """A statement of the run's article that no source backs (the grounding check's verdict, stored with it)."""

    article_id: int
    kind: str  # the article row's kind: draft | humanized
    line: int
    text: str
    status: str  # unsupported | first person | copied
    unsupported: list[str]
    removed: bool  # caught and taken out of the draft before it was stored: never published

    def as_dict(self) -> dict[str, Any]:
        return {"article_id": self.article_id, "kind": self.kind, "line": self.line, "text": self.text,
                "status": self.status, "unsupported": list(self.unsupported), "removed": self.removed}


def unsourced(articles: list[Any]) -> list[Unsourced]:
    """The failing statements of the run's newest article, and those its draft removed before storing."""
    out: list[Unsourced] = []
    graded = [a for a in articles if getattr(a, "grounding_json", None)]
    if not graded:
        return out
    newest = graded[-1]
    for a in graded:
        data = json.loads(a.grounding_json)
        out += [Unsourced(a.id, a.kind, r["line"], r["text"], r["status"], r.get("unsupported", []), True)
                for r in data.get("removed", [])]
        if a is newest:
            out += [Unsourced(a.id, a.kind, r["line"], r["text"], r["status"], r.get("unsupported", []), False)
                    for r in data.get("statements", []) if Grounded(r["status"]).failing]
    return out


@dataclass(frozen=True)
class RunDiff:
    run_id: str
    status: str
    exit_code: int | None
    nudges: int
    # Why a failed run ended: the guard's final decision (hallucination, incomplete, text_tool_call, stuck).
    reason: str | None
    claims: list[DiffClaim]
    facts: list[Fact]
    # The article's statements no source backs: in the article as stored, and those removed from its draft.
    statements: list[Unsourced] = field(default_factory=list)

    @property
    def hallucinations(self) -> list[DiffClaim]:
        return [c for c in self.claims if c.status != Verdict.VERIFIED]

    @property
    def unsourced(self) -> list[Unsourced]:
        """Statements no source backs that are still in the article (the removed ones were never published)."""
        return [s for s in self.statements if not s.removed]

    def as_dict(self) -> dict[str, Any]:
        claims = [c.as_dict() for c in self.claims]
        return {"run_id": self.run_id, "status": self.status, "exit_code": self.exit_code, "nudges": self.nudges,
                "reason": self.reason, "claims": claims, "facts": [f.as_dict() for f in self.facts],
                "hallucinations": [c for c in claims if c["status"] != "verified"],
                "unsourced": [u.as_dict() for u in self.unsourced],
                "removed": [u.as_dict() for u in self.statements if u.removed]}


def run_diff(ledger: Ledger | LedgerReader, run_id: str | None) -> RunDiff | None:
    """``ledger``: a Ledger or a LedgerReader (same read methods)."""
    run = ledger.get_run(run_id)
    if run is None:
        return None
    grouped: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}
    for c in ledger.claims(run.id):
        key = (c.capability, c.value, c.status, c.text)
        grouped.setdefault(key, (c, []))[1].append(c.turn_id)
    ends = [g.kind for g in ledger.guard_events(run.id) if g.action == "fail"]
    facts = ledger.facts(run.id)
    claims = [DiffClaim(c.capability, c.text, c.value, c.status, turn_ids,
                        [f.value for f in facts if f.capability == c.capability and f.value is not None])
              for c, turn_ids in grouped.values()]
    from ..ledger.reader import reader_for

    articles = ledger.articles(run.id) if hasattr(ledger, "articles") else reader_for(ledger).articles(run.id)
    return RunDiff(run_id=run.id, status=run.status, exit_code=run.exit_code, nudges=run.nudges,
                   reason=ends[-1] if ends else None, claims=claims, facts=facts, statements=unsourced(articles))
