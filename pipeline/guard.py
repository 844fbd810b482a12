"""The guard: compares what the model said with what the ledger holds.

This is smolagents' ``_validate_final_answer`` made about business state.
When the model ends a turn without tool calls, ``Guard.review`` reads the
run's facts *from the ledger* (never from model text) and decides:

* **hallucination** – a claim is ``unbacked`` (the capability never succeeded)
  or a ``mismatch`` (it did, but the quoted URL, score or number is not the
  one recorded);
* **text_tool_call** – the model wrote a tool call as text, which is never run;
* **incomplete** – no false claim, but a ``done_when`` capability has no fact;
* otherwise the run is **done**.

``Guard.nudge`` turns a review into one precise instruction that names what
is missing or wrong. The agent loop decides how many nudges to spend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from string import Template
from typing import Any

from .claims import MISMATCH, UNBACKED, VERIFIED, ClaimFound, ClaimRules, text_tool_calls
from .config import CAPABILITIES
from .ledger import Ledger
from .prompts import Prompts


@dataclass
class Review:
    claims: list[ClaimFound]
    facts: dict[str, list[Any]]
    missing: list[str]
    text_calls: list[str] = field(default_factory=list)

    @property
    def hallucinations(self) -> list[ClaimFound]:
        return [c for c in self.claims if c.status != VERIFIED]

    @property
    def claimed(self) -> set[str]:
        return {c.capability for c in self.claims}

    @property
    def called(self) -> set[str]:
        return set(self.facts)

    @property
    def kind(self) -> str | None:
        """The first problem, in order of severity; None when the run is done."""
        if self.hallucinations:
            return "hallucination"
        if self.text_calls:
            return "text_tool_call"
        if self.missing:
            return "incomplete"
        return None


class Guard:
    def __init__(self, ledger: Ledger, rules: ClaimRules, done_when: list[str], prompts: Prompts,
                 language: str, tool_names: list[str]) -> None:
        self.ledger = ledger
        self.rules = rules
        self.done_when = [c for c in CAPABILITIES if c in done_when]
        self.prompts = prompts
        self.language = language
        self.tool_names = tool_names

    def facts(self, run_id: str) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for fact in self.ledger.facts(run_id):
            out.setdefault(fact.capability, []).append(fact.value)
        return out

    def review(self, run_id: str, text: str) -> Review:
        facts = self.facts(run_id)
        return Review(
            claims=self.rules.check(text, facts),
            facts=facts,
            missing=[c for c in self.done_when if c not in facts],
            text_calls=text_tool_calls(text, self.tool_names),
        )

    def nudge(self, review: Review) -> str:
        t = self.prompts.table(f"nudges.{self.language}.toml")
        fill = lambda key, **kv: Template(t[key]).substitute(**kv)  # noqa: E731
        lines = [t["header"]]
        for c in review.hallucinations:
            if c.status == UNBACKED:
                lines.append(fill("unbacked_value", capability=c.capability, value=c.value) if c.value
                             else fill("unbacked", capability=c.capability))
            elif c.status == MISMATCH:
                recorded = ", ".join(str(v) for v in review.facts.get(c.capability, [])) or "nothing"
                lines.append(fill("mismatch", capability=c.capability, value=c.value, recorded=recorded))
        if review.text_calls:
            lines.append(fill("text_tool_call", tools=", ".join(review.text_calls)))
        if review.missing:
            lines.append(fill("incomplete", missing=", ".join(f"`{m}`" for m in review.missing)))
        todo = [c for c in CAPABILITIES if c not in review.facts and (c in review.missing or c in review.claimed)]
        lines.append(fill("footer", next=", ".join(todo) or "none"))
        return "\n".join(_dedupe(lines))


def _dedupe(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in lines if not (x in seen or seen.add(x))]
