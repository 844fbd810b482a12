"""Prometheus metrics, read from the ledger at each scrape.

The ledger is the only source of truth, so the metrics are not a second
record kept in memory: each scrape runs a few grouped queries and reports
totals (counters survive daemon restarts and count runs started by cron,
by the daemon's worker processes and by hand alike). Exposed by the daemon at
``[metrics] listen``; for cron-driven ``pipeline run``, written after each
run to ``[metrics] textfile`` (node_exporter's textfile collector) or pushed
to ``[metrics] pushgateway_url``.

    pipeline_runs_total{channel,model,status}              runs that ended, by outcome ("held": waiting for an editor)
    pipeline_runs_in_progress{channel}
    pipeline_hallucinations_total{model,capability,status} claims the guard did not verify (caught)
    pipeline_nudges_total{model,kind}                      guard nudges (hallucination, incomplete, text_tool_call)
    pipeline_run_duration_seconds{channel}                 histogram, finished runs
    pipeline_step_duration_seconds{capability,ok}          histogram, capability executions
    pipeline_last_success_timestamp_seconds{channel}       end of the last run that ended "done"
    pipeline_publish_attempts_total{target,status}         publications by platform and outcome
    pipeline_model_turns_total{model,served_model,kind}    assistant turns: tool_calls or prose
    pipeline_side_calls_total{model,capability}            model calls made by capabilities (draft, humanize, …)
    pipeline_tokens_total{model,type}                      prompt / completion tokens of every model call
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from ..ledger.utc import aware

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ..config import MetricsConfig

log = logging.getLogger(__name__)

RUN_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


@overload
def _seconds(value: None) -> None: ...
@overload
def _seconds(value: str | datetime) -> float: ...
def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return aware(value).timestamp()


def _histogram(family: Any, labels: list[str], values: list[float], buckets: tuple[float, ...]) -> None:
    values = sorted(values)
    counts, i = [], 0
    for bound in buckets:
        while i < len(values) and values[i] <= bound:
            i += 1
        counts.append((str(float(bound)), i))
    counts.append(("+Inf", len(values)))
    family.add_metric(labels, counts, sum(values))


class LedgerCollector:
    """A prometheus_client collector over one ledger URL (a fresh read-only connection per scrape)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def describe(self) -> list[Metric]:
        return []  # no describe-time query: registering must not touch the database

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        from ..ledger.reader import LedgerReader, sqlite_path
        from .reports import OUTCOME_SQL

        path = sqlite_path(self.url)
        if path is not None and not path.exists():
            return  # nothing has run yet: no series rather than a scrape error
        reader = LedgerReader(self.url)
        try:
            q = reader.tuples
            runs = CounterMetricFamily("pipeline_runs", "Runs that ended, by outcome.", labels=["channel", "model", "status"])
            running = GaugeMetricFamily("pipeline_runs_in_progress", "Runs recorded as running.", labels=["channel"])
            # "held": an article under the pass mark waits for an editor (README, Health): not a failure
            for channel, model, status, n in q(f"SELECT channel, model, {OUTCOME_SQL} AS outcome, COUNT(*) FROM runs "
                                               "GROUP BY channel, model, outcome"):
                if status == "running":
                    running.add_metric([channel], n)
                else:
                    runs.add_metric([channel, model, status], n)
            yield runs
            yield running

            halluc = CounterMetricFamily("pipeline_hallucinations", "Claims the guard did not verify (caught hallucinations).",
                                         labels=["model", "capability", "status"])
            for model, cap, status, n in q("SELECT r.model, c.capability, c.status, COUNT(*) FROM claims c JOIN runs r ON r.id = c.run_id "
                                           "WHERE c.status <> 'verified' GROUP BY r.model, c.capability, c.status"):
                halluc.add_metric([model, cap, status], n)
            yield halluc

            nudges = CounterMetricFamily("pipeline_nudges", "Guard nudges, by what was wrong.", labels=["model", "kind"])
            for model, kind, n in q("SELECT r.model, g.kind, COUNT(*) FROM guard_events g JOIN runs r ON r.id = g.run_id "
                                    "WHERE g.action = 'nudge' GROUP BY r.model, g.kind"):
                nudges.add_metric([model, kind], n)
            yield nudges

            durations: dict[str, list[float]] = {}
            for channel, started, finished in q("SELECT channel, started_at, finished_at FROM runs WHERE finished_at IS NOT NULL"):
                durations.setdefault(channel, []).append(max(0.0, _seconds(finished) - _seconds(started)))
            run_h = HistogramMetricFamily("pipeline_run_duration_seconds", "Duration of finished runs.", labels=["channel"])
            for channel, values in sorted(durations.items()):
                _histogram(run_h, [channel], values, RUN_BUCKETS)
            yield run_h

            steps: dict[tuple[str, str], list[float]] = {}
            for cap, ok, started, finished in q("SELECT capability, ok, started_at, finished_at FROM executions "
                                                "WHERE finished_at IS NOT NULL AND ok IS NOT NULL"):
                steps.setdefault((cap, "true" if ok else "false"), []).append(max(0.0, _seconds(finished) - _seconds(started)))
            step_h = HistogramMetricFamily("pipeline_step_duration_seconds", "Duration of capability executions.",
                                           labels=["capability", "ok"])
            for key, values in sorted(steps.items()):
                _histogram(step_h, list(key), values, STEP_BUCKETS)
            yield step_h

            last = GaugeMetricFamily("pipeline_last_success_timestamp_seconds", "End of the last run that ended done.",
                                     labels=["channel"])
            for channel, finished in q("SELECT channel, MAX(finished_at) FROM runs WHERE status = 'done' GROUP BY channel"):
                last.add_metric([channel], _seconds(finished))
            yield last

            pubs = CounterMetricFamily("pipeline_publish_attempts", "Publications, by platform and outcome.",
                                       labels=["target", "status"])
            for target, status, n in q("SELECT target, status, COUNT(*) FROM publications GROUP BY target, status"):
                pubs.add_metric([target, status], n)
            yield pubs

            turns = CounterMetricFamily("pipeline_model_turns", "Assistant turns: with tool calls, or prose only.",
                                        labels=["model", "served_model", "kind"])
            tokens = CounterMetricFamily("pipeline_tokens", "Tokens, by requested model.", labels=["model", "type"])
            by_model: dict[str, list[int]] = {}
            prose = {(m or "", sv or ""): n for m, sv, n in q(
                "SELECT requested_model, served_model, COUNT(*) FROM turns WHERE role = 'assistant' AND tool_calls_json IS NULL "
                "GROUP BY requested_model, served_model")}
            for model, served, n, prompt, completion in q(  # both from the partial indexes of migration 0004
                    "SELECT requested_model, served_model, COUNT(*), SUM(COALESCE(prompt_tokens, 0)), "
                    "SUM(COALESCE(completion_tokens, 0)) FROM turns WHERE role = 'assistant' "
                    "GROUP BY requested_model, served_model"):
                model, served = model or "", served or ""
                turns.add_metric([model, served, "prose"], prose.get((model, served), 0))
                turns.add_metric([model, served, "tool_calls"], n - prose.get((model, served), 0))
                acc = by_model.setdefault(model, [0, 0])
                acc[0] += prompt or 0
                acc[1] += completion or 0
            side = CounterMetricFamily("pipeline_side_calls", "Model calls made by capabilities, not agent turns.",
                                       labels=["model", "capability"])
            if reader.has_table("model_calls"):
                for model, capability, n, prompt, completion in q(
                        "SELECT requested_model, capability, COUNT(*), SUM(COALESCE(prompt_tokens, 0)), "
                        "SUM(COALESCE(completion_tokens, 0)) FROM model_calls GROUP BY requested_model, capability"):
                    side.add_metric([model or "", capability], n)
                    acc = by_model.setdefault(model or "", [0, 0])
                    acc[0] += prompt or 0
                    acc[1] += completion or 0
            for model, (prompt, completion) in sorted(by_model.items()):
                tokens.add_metric([model, "prompt"], prompt)
                tokens.add_metric([model, "completion"], completion)
            yield turns
            yield side
            yield tokens
        finally:
            reader.close()


def registry_for(url: str) -> CollectorRegistry:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(url))
    return registry


def serve(listen: str, url: str) -> Any:
    """Serve /metrics on ``host:port`` in a background thread; returns the HTTP server (``shutdown()`` to stop)."""
    from prometheus_client import start_http_server

    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "0.0.0.0", registry=registry_for(url))
    return server


def export_after_run(m: MetricsConfig, ledger_url: str, base_dir: Path, timeout_s: float) -> None:
    """For cron: the ledger's metrics to the textfile collector and/or a Pushgateway. Never fails a run.

    ``base_dir``: where a relative ``textfile`` resolves; ``timeout_s``: the Pushgateway's (``[alerts] timeout_s``).
    """
    if not (m.textfile or m.pushgateway_url):
        return
    from ..config import resolve

    try:
        registry = registry_for(ledger_url)
        if m.textfile:
            from prometheus_client import write_to_textfile

            path = resolve(base_dir, m.textfile)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_to_textfile(str(path), registry)  # written to a temporary file, then renamed
        if m.pushgateway_url:
            from prometheus_client import push_to_gateway

            push_to_gateway(m.pushgateway_url, job="pipeline", registry=registry, timeout=timeout_s)
    except Exception as exc:  # metrics are an observer: the run's outcome stands
        log.warning("metrics export failed: %s: %s", type(exc).__name__, exc)
