"""The agent loop: a model drives the capabilities; the ledger decides when it is done.

    while turns remain:
        reply = model(messages, tools)
        if reply has tool calls:           execute each (ledger first), feed results back
        else:                              the guard reviews the text against the ledger
            clean and required facts held  -> done
            otherwise, nudges left         -> nudge naming what is missing or false, loop
            otherwise                      -> AgentHallucinationError / AgentIncompleteError

A model can also loop on tool calls that fail: the same tool failing with the
same error twice in a row (no success in between) gets a targeted nudge naming
the next step and what it needs; ``stuck_after`` times ends the run at once as
incomplete, reason ``stuck`` (AgentStuckError) — seconds, not ``max_turns``.
A humanize that ran but scored below the threshold (``passed: false``) counts
as a failure here: repeating it unchanged is the loop the real model fell into.

A run also ends on business state in turns: once ``done_when`` holds and the
report is recorded, the model gets one closing turn (``tool_choice = "none"``:
no tool is offered to call, none is run) whose claims the guard diffs, and the
run ends. A model that answers it with tool calls (or calls written as text)
gets no further turn; only a false claim in it is still nudged (bounded as
above). ``runs.turns_after_done`` records how many turns that took (≤ 1 unless
the closing message lied): the real model otherwise re-ran ``topic`` until
``max_turns``.

"The model stopped calling tools" is never, by itself, "the task is done".
With the guard switched off the loop stops at the first turn without tool
calls (the naive loop, kept for debugging), but the outcome is still decided
from the ledger: no required facts, no success.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..config import AgentConfig
from ..errors import (
    AgentHallucinationError,
    AgentIncompleteError,
    AgentStuckError,
    RunInterrupted,
)
from ..ledger.locks import lost_lock
from ..model.messages import ToolCall
from ..runtime import deadline, shutdown
from ..states import GuardAction, GuardKind
from ..tools import catalog
from ..tools.toolbox import RunContext, Toolbox
from .events import Nudge, RunObserver
from .guard import Assessment, Guard

if TYPE_CHECKING:
    from ..ledger.models import Turn
    from ..model.messages import Reply
    from ..tools.toolbox import ToolResult

log = logging.getLogger(__name__)

class AgentLoop:
    def __init__(self, ctx: RunContext, toolbox: Toolbox, guard: Guard, cfg: AgentConfig,
                 observer: RunObserver | None = None, channel: str = "default") -> None:
        self.ctx = ctx
        self.toolbox = toolbox
        self.guard = guard
        self.cfg = cfg
        self.observer = observer or RunObserver()
        self.channel = channel
        self._served_model: str | None = None  # what the provider said it served, for the probe's cache

    def _say(self, role: str, content: str) -> dict[str, Any]:
        self.ctx.ledger.add_turn(self.ctx.run_id, role, content)
        return {"role": role, "content": content}

    def run(self) -> Assessment:
        ctx, ledger, run_id = self.ctx, self.ctx.ledger, self.ctx.run_id
        messages = [
            self._say("system", ctx.prompts.render("system.md")),
            self._say("user", ctx.prompts.render("task.md", channel=self.channel, today=datetime.now().date().isoformat())),
        ]
        nudges = 0  # consecutive nudges; reset when the model makes real progress
        failures: dict[tuple[str, str], int] = {}  # (tool, error) -> times in a row since the last progress
        escalated = self.cfg.constrained_tools == "always"
        closing = False  # done_when holds and the report is recorded: only a closing message is asked for
        after_done = 0
        for _ in range(self.cfg.max_turns):
            if shutdown.requested():  # between steps: whatever ran last is committed
                raise RunInterrupted("stop requested; stopped between two steps")
            if why := lost_lock():  # another host may now run this channel: never alongside it
                raise RunInterrupted(f"{why}; stopped between two steps")
            deadline.check()  # the run's deadline may have passed between two calls
            with deadline.limit(self.cfg.step_deadline_s, "step: model turn"):
                choice = "none" if closing else "auto"
                reply = (self._constrained_turn(messages, choice) if escalated
                         else ctx.llm.complete(messages, tools=self.toolbox.schemas(), tool_choice=choice))
            turn = ledger.add_turn(
                run_id, "assistant", reply.text,
                tool_calls_json=json.dumps(reply.as_message().get("tool_calls"), ensure_ascii=False) if reply.tool_calls else None,
                requested_model=ctx.llm.cfg.model, served_model=reply.served_model,
                prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, latency_ms=reply.latency_ms,
            )
            self.observer.turn(reply.text, [c.name for c in reply.tool_calls], reply.latency_ms)
            self._served_model = reply.served_model or self._served_model
            if closing:
                after_done += 1
                ledger.record_turns_after_done(run_id, after_done)
                if reply.tool_calls:  # asked not to: never run, and no further turn for them
                    log.warning("agent: %s called %s after the work was done; not run, the run ends", ctx.llm.cfg.model,
                                ", ".join(c.name for c in reply.tool_calls))

            if reply.tool_calls and not closing:
                messages.append(reply.as_message())
                progressed = False
                repeated: tuple[str, str, int] | None = None
                for call in reply.tool_calls:
                    self.observer.tool_started(call.name)
                    try:
                        with deadline.limit(self.cfg.step_deadline_s, f"step: {call.name}"):
                            result = self.toolbox.execute(ctx, call, turn)
                    except BaseException as exc:  # the step ends the run (held below the pass mark, a deadline …)
                        shown = str(exc) or type(exc).__name__
                        self.observer.tool_finished(call.name, False, {"error": shown if len(shown) <= 160 else shown[:159] + "…"})
                        raise
                    content = result.content()
                    ledger.add_turn(run_id, "tool", content, tool_call_id=call.id)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                    self.observer.tool_finished(call.name, result.ok, result.payload)
                    failure = _failure(call.name, result)
                    if failure is None:
                        progressed = True
                        failures.clear()
                        continue
                    key, error = failure
                    failures[key] = failures.get(key, 0) + 1
                    if failures[key] >= 2 and (repeated is None or failures[key] > repeated[2]):
                        repeated = (call.name, error, failures[key])
                if progressed:
                    nudges = 0
                if repeated:
                    self._repeated_failure(turn, messages, *repeated)
                closing = progressed and self._work_done()
                if closing:
                    ledger.record_turns_after_done(run_id, 0)
                continue

            review = self.guard.review(run_id, reply.text)
            ledger.record_claims(run_id, turn, [c.as_dict() for c in review.claims])
            if not self.cfg.hallucination_guard:
                return self._naive_end(review, turn)
            if review.kind is None or (closing and not review.hallucinations):
                return review  # after the work is done, calls (native or as text) are not run: the run ends
            if nudges < self.cfg.hallucination_max_nudges:
                nudges += 1
                message = self.guard.nudge(review)
                ledger.record_guard_event(run_id, turn, review.kind, GuardAction.NUDGE, 0, message)
                log.warning("guard: %s in turn %s, nudge %d/%d", review.kind, turn.seq, nudges, self.cfg.hallucination_max_nudges)
                self.observer.nudged(Nudge(review.kind, nudges, self.cfg.hallucination_max_nudges,
                                           tuple(review.hallucinations), tuple(review.missing)))
                messages.append({"role": "assistant", "content": reply.text or "(empty reply)"})
                messages.append({"role": "user", "content": message})
                ledger.add_turn(run_id, "nudge", message)
                escalated = escalated or self._can_escalate()
                continue
            ledger.record_guard_event(run_id, turn, review.kind, GuardAction.FAIL, nudges, self.guard.nudge(review))
            self._fail(review, f"still {review.kind.replace('_', ' ')} after {nudges} nudge(s)")

        review = self.guard.review(run_id, "")
        ledger.record_guard_event(run_id, None, GuardKind.INCOMPLETE, GuardAction.FAIL, nudges, f"max_turns {self.cfg.max_turns} reached")
        if review.missing:
            raise AgentIncompleteError(set(review.missing), f"max_turns {self.cfg.max_turns} reached")
        return review

    def _repeated_failure(self, turn: Turn, messages: list[dict[str, Any]], tool: str, error: str, count: int) -> None:
        """Same tool, same error, again: say what to do next; past ``stuck_after`` end the run as stuck."""
        ledger, run_id = self.ctx.ledger, self.ctx.run_id
        step = self.guard.next_step(run_id)
        message = self.guard.repeated_failure(tool, error, count, step)
        if count >= self.cfg.stuck_after:
            ledger.record_guard_event(run_id, turn, GuardKind.STUCK, GuardAction.FAIL, count, message)
            log.warning("guard: stuck in turn %s: %s failed %d times with the same error", turn.seq, tool, count)
            missing = {c for c in self.guard.done_when if c not in self.guard.facts(run_id)}
            raise AgentStuckError(missing, tool, error, count)
        ledger.record_guard_event(run_id, turn, GuardKind.REPEATED_FAILURE, GuardAction.NUDGE, 0, message)
        log.warning("guard: %s failed %d times with the same error in turn %s, nudge", tool, count, turn.seq)
        self.observer.nudged(Nudge(GuardKind.REPEATED_FAILURE, count, self.cfg.stuck_after,
                                   missing=(step.capability,) if step else ()))
        messages.append({"role": "user", "content": message})
        ledger.add_turn(run_id, "nudge", message)

    def _work_done(self) -> bool:
        """done_when holds and the report (when the pipeline has one) is recorded: nothing is left to call."""
        needed = set(self.guard.done_when) | ({"report"} & set(catalog.names()))
        return needed <= set(self.guard.facts(self.ctx.run_id))

    def _can_escalate(self) -> bool:
        """Nudges alone may not bring real calls: constrain the next turns, if the provider can."""
        from ..model.llm import is_local
        from ..model.probe import supports_json_schema

        llm_cfg = self.ctx.llm.cfg
        if self.cfg.constrained_tools == "off" or is_local(llm_cfg.model):  # the local provider constrains itself
            return False
        # Config, litellm's model map, or (neither knowing) a probe of this model and api_base, kept in the ledger.
        if not supports_json_schema(self.ctx.llm, self.ctx.ledger, self._served_model):
            log.warning("guard: %s does not support json_schema output; not escalating", llm_cfg.model)
            return False
        self.observer.escalated()
        return True

    def _constrained_turn(self, messages: list[dict[str, Any]], tool_choice: str = "auto") -> Reply:
        """One turn asked as a JSON-schema constrained decision; the answer comes back as tool calls.
        ``tool_choice = "none"``: the schema admits only the final answer."""
        from ..model.constrained import (
            constrained_response_format,
            decision_messages,
            parse_constrained,
        )

        tools = self.toolbox.schemas()
        reply = self.ctx.llm.complete(decision_messages(messages, tools),
                                      response_format=constrained_response_format(tools, tool_choice, wrap=True))
        content, calls = parse_constrained(reply.text)
        return replace(reply, text=content, tool_calls=[ToolCall.from_openai(c) for c in calls])

    def _naive_end(self, review: Assessment, turn: Turn) -> Assessment:
        """Guard off: stop at the first turn without tool calls, judge by the ledger alone."""
        if review.kind:
            self.ctx.ledger.record_guard_event(self.ctx.run_id, turn, review.kind, GuardAction.OFF, 0, "guard disabled: no nudge")
        if review.missing:
            raise AgentIncompleteError(set(review.missing), "the model stopped calling tools (guard off)")
        return review

    def _fail(self, review: Assessment, reason: str) -> None:
        if review.hallucinations:
            claimed = {c.capability for c in review.hallucinations}
            detail = "; ".join(f"{c.capability} {c.status}" + (f" ({c.value})" if c.value else "") for c in review.hallucinations)
            raise AgentHallucinationError(claimed=claimed, called=review.called, detail=f"{reason}: {detail}")
        raise AgentIncompleteError(set(review.missing), reason)


def _failure(tool: str, result: ToolResult) -> tuple[tuple[str, str], str] | None:
    """``((tool, error pattern), error)`` when a call did not move the run forward, else None.

    Digits are blanked so "no article 5" and "no article 6" are the same mistake. A call that
    ran but did not finish its step (a humanize below the threshold) did not move the run forward either.
    """
    if result.ok and all(c.finished(result.payload) for c in catalog.capabilities() if c.name == tool):
        return None
    error = result.payload.get("error") or f"scored {result.payload.get('score')}, below the threshold {result.payload.get('threshold')}"
    return (tool, re.sub(r"\d+(\.\d+)?", "#", str(error))), str(error)
