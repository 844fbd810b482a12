"""The guard: compares what the model said with what the ledger holds.

When the model ends a turn without tool calls, ``Guard.review`` reads the
run's facts *from the ledger* (never from model text) and decides:

* **hallucination** – a claim is ``unbacked`` (the capability never succeeded)
  or a ``mismatch`` (it did, but the quoted URL, score or number is not the
  one recorded);
* **text_tool_call** – the model wrote a tool call as text, which is never run;
* **incomplete** – no false claim, but a ``done_when`` capability has no fact;
* otherwise the run is **done**.

``Guard.nudge`` turns a review into one precise instruction that names what
is missing or wrong, and the *next* step in pipeline order with what it needs
("call `humanize` with article_id 3; publish needs a score ≥ 50"), read from
the ledger: a model told only "publish and register are missing" calls them
with placeholders and never picks a topic. The agent loop decides how many
nudges to spend.
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
class NextStep:
    """The first step of the pipeline the ledger does not hold yet, and the template key saying what it needs."""

    capability: str
    needs: str  # key of a `needs_*` line in nudges.*.toml
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Review:
    claims: list[ClaimFound]
    facts: dict[str, list[Any]]
    missing: list[str]
    text_calls: list[str] = field(default_factory=list)
    next_step: NextStep | None = None

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
                 language: str, tool_names: list[str], threshold: float | None = None) -> None:
        self.ledger = ledger
        self.rules = rules
        self.done_when = [c for c in CAPABILITIES if c in done_when]
        self.prompts = prompts
        self.language = language
        self.tool_names = tool_names
        self.threshold = threshold  # [humanize] threshold: a humanize below it is not a finished step

    def next_step(self, run_id: str) -> NextStep | None:
        """The next step in pipeline order, with the ids it needs, from this run's facts (never from model text)."""
        latest: dict[str, dict[str, Any]] = {}
        best_score: float | None = None
        for fact in self.ledger.facts(run_id):
            if fact.capability == "humanize":
                if isinstance(fact.result.get("score"), (int, float)):
                    best_score = max(best_score or 0.0, float(fact.result["score"]))
                if fact.result.get("passed") is False and "humanize" in latest:
                    continue  # a later rewrite that failed does not undo one that passed
            latest[fact.capability] = fact.result
        last_needed = max((CAPABILITIES.index(c) for c in self.done_when), default=len(CAPABILITIES) - 1)
        for cap in CAPABILITIES[:last_needed + 1]:
            result = latest.get(cap)
            if cap == "topic" and result is None:
                return NextStep("topic", "needs_none")
            if cap == "draft" and result is None:
                return NextStep("draft", "needs_draft", {"topic_id": latest["topic"].get("topic_id")})
            if cap == "humanize":
                passed = result is not None and result.get("passed", True) is not False
                if not passed:
                    return NextStep("humanize", "needs_humanize", {
                        "article_id": latest["draft"].get("article_id"), "threshold": _num(self.threshold),
                        "best": "none yet" if best_score is None else _num(best_score)})
            if cap == "publish" and (result is None or result.get("verified") is False):
                return NextStep("publish", "needs_publish", {"article_id": latest["humanize"].get("article_id")})
            if cap == "register" and result is None:
                return NextStep("register", "needs_register", {"publication_id": latest["publish"].get("publication_id")})
            if cap == "report" and result is None:
                return NextStep("report", "needs_none")
        return None

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
            next_step=self.next_step(run_id),
        )

    def next_step_line(self, step: NextStep | None) -> str:
        t = self.prompts.table(f"nudges.{self.language}.toml")
        if step is None:
            return t["footer_done"]
        needs = Template(t[step.needs]).safe_substitute(**step.values)
        return Template(t["next_step"]).substitute(step=step.capability, needs=needs)

    def repeated_failure(self, tool: str, error: str, count: int, step: NextStep | None) -> str:
        """The targeted nudge after the same tool failed the same way ``count`` times in a row."""
        t = self.prompts.table(f"nudges.{self.language}.toml")
        head = Template(t["repeated_failure"]).substitute(tool=tool, error=error[:300], count=count)
        return "\n".join([t["header"], head, self.next_step_line(step)])

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
        lines.append(self.next_step_line(review.next_step))
        lines.append(t["footer"])
        return "\n".join(_dedupe(lines))


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))
