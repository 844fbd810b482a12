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

from ..ledger.writer import Ledger
from ..states import GuardKind
from ..tools import catalog
from ..tools.claims import (
    MISMATCH,
    UNBACKED,
    VERIFIED,
    ClaimFound,
    ClaimRules,
    text_tool_calls,
)
from ..tools.prompts import Prompts


@dataclass
class NextStep:
    """The first step of the pipeline the ledger does not hold yet, and the values its nudge line quotes."""

    capability: str
    arguments: list[str] = field(default_factory=list)  # the step's argument names, in signature order
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class Assessment:
    """The guard's assessment of one model reply: its claims judged against the facts, and what is still missing."""

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
    def kind(self) -> GuardKind | None:
        """The first problem, in order of severity; None when the run is done."""
        if self.hallucinations:
            return GuardKind.HALLUCINATION
        if self.text_calls:
            return GuardKind.TEXT_TOOL_CALL
        if self.missing:
            return GuardKind.INCOMPLETE
        return None


class Guard:
    def __init__(self, ledger: Ledger, rules: ClaimRules, done_when: list[str], prompts: Prompts,
                 language: str, tool_names: list[str], threshold: float | None = None) -> None:
        self.ledger = ledger
        self.rules = rules
        self.done_when = [c for c in catalog.names() if c in done_when]
        self.prompts = prompts
        self.language = language
        self.tool_names = tool_names
        self.threshold = threshold  # [humanize] threshold, quoted by its nudge line

    def next_step(self, run_id: str) -> NextStep | None:
        """The next step in pipeline order, with the ids it needs, from this run's facts (never from model text).

        A step is done when one of its results ``finished`` it (a humanize below the threshold did
        not); each argument of the next step is taken from the latest finished step that returned it.
        """
        results: dict[str, list[dict[str, Any]]] = {}
        for fact in self.ledger.facts(run_id):
            results.setdefault(fact.capability, []).append(fact.result)
        steps = catalog.capabilities()
        names = [c.name for c in steps]
        last_needed = max((names.index(c) for c in self.done_when), default=len(steps) - 1)
        finished: list[dict[str, Any]] = []  # the latest finished result of each step so far, in order
        for cap in steps[:last_needed + 1]:
            mine = results.get(cap.name, [])
            done = [r for r in mine if cap.finished(r)]
            if done:
                finished.append(done[-1])
                continue
            values = {arg: next((r[arg] for r in reversed(finished) if arg in r), None) for arg in cap.argument_names}
            return NextStep(cap.name, cap.argument_names, {**values, "threshold": _num(self.threshold), **cap.hint(mine)})
        return None

    def facts(self, run_id: str) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for fact in self.ledger.facts(run_id):
            out.setdefault(fact.capability, []).append(fact.value)
        return out

    def review(self, run_id: str, text: str) -> Assessment:
        facts = self.facts(run_id)
        return Assessment(
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
        if not step.arguments:
            key = "needs_none"
        else:
            key = f"needs_{step.capability}" if f"needs_{step.capability}" in t else "needs_args"
        args = ", ".join(f"{a} {step.values.get(a)}" for a in step.arguments)
        needs = Template(t[key]).safe_substitute(args=args, **step.values)
        return Template(t["next_step"]).substitute(step=step.capability, needs=needs)

    def repeated_failure(self, tool: str, error: str, count: int, step: NextStep | None) -> str:
        """The targeted nudge after the same tool failed the same way ``count`` times in a row."""
        t = self.prompts.table(f"nudges.{self.language}.toml")
        head = Template(t["repeated_failure"]).substitute(tool=tool, error=error[:300], count=count)
        return "\n".join([t["header"], head, self.next_step_line(step)])

    def nudge(self, review: Assessment) -> str:
        t = self.prompts.table(f"nudges.{self.language}.toml")

        def fill(key: str, **kv: Any) -> str:
            return Template(t[key]).substitute(**kv)

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
