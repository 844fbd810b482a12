"""Prometheus metrics from the ledger: the daemon's /metrics, the textfile collector and the Pushgateway for cron."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import KEY_ENV


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a daemon subprocess
def test_daemon_metrics_count_a_nudge_and_a_caught_hallucination(harness):
    port = free_port()
    extra = f'\n[daemon]\nstate_dir = "state"\ncron = "0 0 1 1 *"\n\n[metrics]\nlisten = "127.0.0.1:{port}"\n'
    recovered, _ = harness.run("recover", extra)  # prose claims first (caught), a nudge, then honest work
    failed, _ = harness.run("prose", extra)
    assert (recovered.status, failed.status) == ("done", "hallucination")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "daemon", "--config", str(harness.dir / "config.toml")],
                            env={**os.environ, KEY_ENV: "x"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, text = time.monotonic() + 60, None
        while time.monotonic() < deadline and text is None:
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
                text = resp.text if resp.status_code == 200 else None
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
        assert text is not None, "no /metrics"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    found = samples(text)
    model = "openai/recover"
    assert value(found, "pipeline_runs_total", channel="default", model=model, status="done") == 1
    assert value(found, "pipeline_runs_total", model="openai/prose", status="hallucination") == 1
    assert value(found, "pipeline_nudges_total", model=model) == 1
    assert value(found, "pipeline_nudges_total", model="openai/prose") == 2
    assert value(found, "pipeline_hallucinations_total", model=model, capability="publish", status="unbacked") >= 1
    assert value(found, "pipeline_publish_attempts_total", target="local", status="verified") == 1
    assert value(found, "pipeline_run_duration_seconds_count", channel="default") == 2
    assert value(found, "pipeline_step_duration_seconds_count", capability="publish", ok="true") == 1
    assert value(found, "pipeline_last_success_timestamp_seconds", channel="default") > time.time() - 600
    assert value(found, "pipeline_model_turns_total", model="openai/prose", kind="prose") == 3
    assert value(found, "pipeline_tokens_total", model=model, type="prompt") > 0
    # The capabilities' own model calls (pipeline.model.calls): the recovered run drafted and humanized once each.
    assert value(found, "pipeline_side_calls_total", model=model, capability="draft") >= 1
    assert value(found, "pipeline_side_calls_total", model=model, capability="humanize") >= 1


def test_cron_runs_write_the_textfile_and_push(harness):
    pushed: list[tuple[str, str, bytes]] = []

    class Gateway(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_PUT(self):
            pushed.append((self.command, self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    gateway = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=gateway.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()  # shutdown() waits a poll
    try:
        extra = (f'\n[metrics]\ntextfile = "textfile/pipeline.prom"\n'
                 f'pushgateway_url = "http://127.0.0.1:{gateway.server_address[1]}"\n')
        harness.run("honest", extra)
        harness.run("silent", extra)
    finally:
        gateway.shutdown()
    found = samples((harness.dir / "textfile" / "pipeline.prom").read_text())
    assert value(found, "pipeline_runs_total", status="done") == 1 and value(found, "pipeline_runs_total", status="incomplete") == 1
    assert [(m, p) for m, p, _ in pushed] == [("PUT", "/metrics/job/pipeline")] * 2
    assert value(samples(pushed[-1][2].decode()), "pipeline_runs_total") == 2
