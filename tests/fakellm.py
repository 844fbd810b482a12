"""A scripted OpenAI-compatible chat server on 127.0.0.1, for end-to-end tests through litellm and benchmarks.

The model name picks the scenario (``openai/honest``, ``openai/prose`` …), so
one server plays every scenario and litellm is exercised for real, over HTTP.
The scenarios themselves live in ``scenarios.py`` and are shared with the
in-process ``scenarios.scripted(...)`` model; this module adds what only HTTP
has: status codes (``down``, ``flaky``), latency (``delay_s``) and the request
bodies as litellm sent them (``requests``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scenarios import (  # noqa: F401
    DRAFT,
    FLAKY_FAILURES,
    HUMANIZED,
    INCIDENT_TEXT,
    INCIDENT_TEXT_EN,
    LOWSCORE,
    ORDER,
    agent_turn,
    decision_turn,
    honest,
    respond,
    served_model,
)


class FakeLLM:
    """Start with ``FakeLLM().start()``; ``api_base`` is what litellm needs."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.marks: dict[str, int] = {}  # scenario -> requests seen before mark(): "flaky" fails after each mark
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeLLM:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def mark(self, scenario: str) -> None:
        """Start ``scenario`` afresh: "flaky" fails its first requests again (the server outlives one test)."""
        self.marks[scenario] = self.count(scenario)

    def count(self, scenario: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.get("model") == scenario)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("chat/completions"):
                    return self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                with fake.lock:
                    fake.requests.append(req)
                    n = len(fake.requests)
                    seen = sum(1 for r in fake.requests if r.get("model") == req.get("model"))
                scenario = req.get("model", "")
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if scenario == "down" or (scenario == "flaky" and seen - fake.marks.get(scenario, 0) <= FLAKY_FAILURES):
                    return self._send(503, {"error": {"message": "upstream overloaded", "type": "server_error"}})
                messages = req.get("messages", [])
                msg = respond(scenario, messages, req.get("tools"), req.get("response_format"), n)
                message = {"role": "assistant", "content": msg.get("content")}
                if msg.get("tool_calls"):
                    message["tool_calls"] = msg["tool_calls"]
                self._send(200, {
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                    "model": served_model(scenario),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if msg.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 10 * len(messages), "completion_tokens": 20, "total_tokens": 10 * len(messages) + 20},
                })

        return Handler


if __name__ == "__main__":  # python tests/fakellm.py [delay_s]  → serve until killed
    import sys

    fake = FakeLLM(delay_s=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0).start()
    print(fake.api_base, flush=True)
    threading.Event().wait()
