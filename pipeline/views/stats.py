"""``pipeline stats``: per-model reliability, from the ledger alone.

For each requested model (``runs.model``; ``turns.requested_model`` for turn
numbers) over the runs started, and the turns made, since a time:
how many runs and how they ended, which models the provider actually served,
the share of model turns that were prose only (no tool call), nudges per run,
claims the guard did not verify (by capability and verdict), tool calls
written as text, stuck runs (ended ``incomplete``: the model never produced
the required facts), turns after the work was done (``runs.turns_after_done``:
the closing message, so ≤ 1 a run unless it lied), p50/p95 turn latency, the capabilities' own model
calls (``model_calls``: draft, humanize, brainstorm) with their p50/p95 latency, tokens of every model
call, and the total time spent in the model. A handful of grouped
queries, so the command stays fast on a large ledger (``bench/bench_stats.py``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..ledger.utc import aware
from ..states import RunStatus

if TYPE_CHECKING:
    from ..ledger.reader import LedgerReader

_SPAN = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``7d``, ``24h``, ``30m``, ``2w`` ago, or an ISO date/time (UTC unless it says otherwise)."""
    now = now or datetime.now(timezone.utc)
    if m := _SPAN.match(value.strip().lower()):
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    t = datetime.fromisoformat(value.strip())
    return aware(t)


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    # Nearest rank: a latency some turn really had.
    k = max(0, min(len(sorted_values) - 1, round(q * len(sorted_values) + 0.5) - 1))
    return round(sorted_values[k], 1)


@dataclass(frozen=True)
class ModelStats:
    """One requested model's reliability over the runs started (and the turns made) since a time."""

    model: str
    served: dict[str, int]  # served model -> assistant turns it answered
    runs: int
    outcomes: dict[str, int]  # run status -> runs
    nudges: int
    nudges_per_run: float
    model_turns: int
    prose_only_turns: int
    prose_only_share: float
    hallucinations: dict[str, dict[str, int]]  # capability -> verdict -> unverified claims
    hallucinations_total: int
    text_tool_calls: int
    stuck_runs: int
    turns_after_done: int  # summed over the runs that got there
    turns_after_done_max: int | None  # the worst run; None when no run finished its work
    latency_ms_p50: float | None
    latency_ms_p95: float | None
    side_calls: int  # model calls made by capabilities (the agent's are model_turns)
    side_call_latency_ms_p50: float | None
    side_call_latency_ms_p95: float | None
    model_time_s: float  # every model call's latency, turns and side calls
    prompt_tokens: int  # every model call's, turns and side calls
    completion_tokens: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def model_stats(reader: LedgerReader, since: datetime | None = None) -> list[ModelStats]:
    """One entry per requested model, most runs first."""
    where, params = "", {}
    if since is not None:
        where, params = "WHERE r.started_at >= :since", {"since": reader.time_param(since)}
    models: dict[str, dict[str, Any]] = {}

    def entry(model: str) -> dict[str, Any]:
        return models.setdefault(model, {
            "model": model, "served": {}, "runs": 0, "outcomes": {}, "nudges": 0, "nudges_per_run": 0.0,
            "model_turns": 0, "prose_only_turns": 0, "prose_only_share": 0.0, "hallucinations": {},
            "hallucinations_total": 0, "text_tool_calls": 0, "stuck_runs": 0, "turns_after_done": 0,
            "turns_after_done_max": None, "latency_ms_p50": None,
            "latency_ms_p95": None, "side_calls": 0, "side_call_latency_ms_p50": None, "side_call_latency_ms_p95": None,
            "model_time_s": 0.0, "prompt_tokens": 0, "completion_tokens": 0})

    for row in reader.rows(f"SELECT r.model AS model, r.status AS status, COUNT(*) AS n, SUM(r.nudges) AS nudges "
                           f"FROM runs r {where} GROUP BY r.model, r.status", **params):
        e = entry(row.model)
        e["runs"] += row.n
        e["outcomes"][row.status] = row.n
        e["nudges"] += row.nudges or 0
        if row.status == RunStatus.INCOMPLETE:
            e["stuck_runs"] += row.n
    # Turn numbers come from the partial indexes on assistant turns (migration 0004), keyed by the
    # model the turn asked for; --since counts the turns made since then.
    twhere, tparams = ("AND created_at >= :since", params) if since is not None else ("", {})
    for model, served, n, prompt, completion in reader.tuples(
            f"SELECT requested_model, served_model, COUNT(*), SUM(COALESCE(prompt_tokens, 0)), "
            f"SUM(COALESCE(completion_tokens, 0)) FROM turns WHERE role = 'assistant' {twhere} "
            f"GROUP BY requested_model, served_model", **tparams):
        e = entry(model or "?")
        e["served"][served or "?"] = n
        e["model_turns"] += n
        e["prompt_tokens"] += prompt or 0
        e["completion_tokens"] += completion or 0
    for model, n in reader.tuples(
            f"SELECT requested_model, COUNT(*) FROM turns WHERE role = 'assistant' AND tool_calls_json IS NULL {twhere} "
            f"GROUP BY requested_model", **tparams):
        entry(model or "?")["prose_only_turns"] += n
    for row in reader.rows(
            f"SELECT r.model AS model, c.capability AS capability, c.status AS status, COUNT(*) AS n "
            f"FROM claims c JOIN runs r ON r.id = c.run_id {where} {'AND' if where else 'WHERE'} c.status <> 'verified' "
            f"GROUP BY r.model, c.capability, c.status", **params):
        e = entry(row.model)
        e["hallucinations"].setdefault(row.capability, {})[row.status] = row.n
        e["hallucinations_total"] += row.n
    for row in reader.rows(
            f"SELECT r.model AS model, COUNT(*) AS n FROM guard_events g JOIN runs r ON r.id = g.run_id "
            f"{where} {'AND' if where else 'WHERE'} g.kind = 'text_tool_call' GROUP BY r.model", **params):
        entry(row.model)["text_tool_calls"] = row.n
    latencies: dict[str, list[float]] = {}
    for model, ms in reader.tuples(
            f"SELECT requested_model, latency_ms FROM turns WHERE role = 'assistant' AND latency_ms IS NOT NULL {twhere}",
            **tparams):
        latencies.setdefault(model or "?", []).append(ms)
    for model, values in latencies.items():
        values.sort()
        entry(model).update(latency_ms_p50=_percentile(values, 0.50), latency_ms_p95=_percentile(values, 0.95),
                            model_time_s=sum(values) / 1000)
    if reader.has_table("model_calls"):  # a ledger from before revision 0016 has none
        side: dict[str, list[float]] = {}
        for model, prompt, completion, ms in reader.tuples(
                f"SELECT requested_model, prompt_tokens, completion_tokens, latency_ms FROM model_calls "
                f"{twhere.replace('AND', 'WHERE', 1)}", **tparams):
            e = entry(model or "?")
            e["side_calls"] += 1
            e["prompt_tokens"] += prompt or 0
            e["completion_tokens"] += completion or 0
            side.setdefault(model or "?", []).append(ms or 0.0)
        for model, values in side.items():
            values.sort()
            e = entry(model)
            e.update(side_call_latency_ms_p50=_percentile(values, 0.50), side_call_latency_ms_p95=_percentile(values, 0.95))
            e["model_time_s"] += sum(values) / 1000
    # Last: on a ledger from before migration 0014 (read as it is) the column is missing, and on PostgreSQL
    # the failed statement would abort the reads after it.
    try:
        after = reader.tuples(f"SELECT r.model, SUM(r.turns_after_done), MAX(r.turns_after_done) FROM runs r {where} "
                              f"{'AND' if where else 'WHERE'} r.turns_after_done IS NOT NULL GROUP BY r.model", **params)
    except Exception:  # LedgerError from the CLI's reader, SQLAlchemy's from an engine's (never imported here)
        after = []
    for model, total, worst in after:
        entry(model).update(turns_after_done=total or 0, turns_after_done_max=worst)
    for e in models.values():
        e["model_time_s"] = round(e["model_time_s"], 1)
    for e in models.values():
        e["nudges_per_run"] = round(e["nudges"] / e["runs"], 2) if e["runs"] else 0.0
        e["prose_only_share"] = round(e["prose_only_turns"] / e["model_turns"], 3) if e["model_turns"] else 0.0
    return [ModelStats(**e) for e in sorted(models.values(), key=lambda e: (-e["runs"], e["model"]))]


@dataclass(frozen=True)
class ScoreStats:
    """Humanized articles' scores under one scorer: scores of two scorers are never pooled."""

    scorer: str
    articles: int
    scored: int
    median: float | None
    published: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


HEURISTIC = "stylometric heuristic (before token-probability scoring)"


def score_stats(reader: LedgerReader, since: datetime | None = None) -> list[ScoreStats]:
    """One entry per scorer version that measured a humanized article (``articles.scorer``; NULL: the heuristic)."""
    where, params = "", {}
    if since is not None:
        where, params = "AND a.created_at >= :since", {"since": reader.time_param(since)}
    by: dict[str, list[tuple[float | None, bool]]] = {}
    for scorer, value, published in reader.tuples(
            "SELECT a.scorer, a.score, EXISTS (SELECT 1 FROM publications p WHERE p.article_id = a.id "
            f"AND p.status = 'verified') FROM articles a WHERE a.kind = 'humanized' {where}", **params):
        by.setdefault(scorer or HEURISTIC, []).append((value, bool(published)))
    out = []
    for scorer, rows in sorted(by.items(), key=lambda kv: -len(kv[1])):
        values = sorted(v for v, _ in rows if v is not None)
        out.append(ScoreStats(scorer, len(rows), len(values), _percentile(values, 0.5) if values else None,
                              sum(1 for _, p in rows if p)))
    return out
