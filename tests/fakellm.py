"""A scripted OpenAI-compatible chat server on 127.0.0.1, for end-to-end tests through litellm and benchmarks.

The model name picks the scenario (``openai/honest``, ``openai/prose`` …), so
one server plays every scenario and litellm is exercised for real, over HTTP.
The scenarios themselves live in ``scenarios.py`` and are shared with the
in-process ``scenarios.scripted(...)`` model; this module adds what only HTTP
has: status codes (``down``, ``flaky``), latency (``delay_s``) and the request
bodies as litellm sent them (``requests``).

Shaped after llama.cpp's OpenAI-compatible server (tests/test_real_server.py runs the
same paths against the real one): an ``api_key`` is checked as a Bearer token and a
wrong one gets its 401 body; error bodies carry ``code``, ``message`` and ``type``;
``usage`` includes ``prompt_tokens_details.cached_tokens``; ``stream: true`` is answered
as server-sent events (a role chunk, content or tool-call deltas, a finish chunk, a
usage chunk when ``stream_options.include_usage``, then ``[DONE]``); a capability
probe (``pipeline.model.probe``) is honoured only by scenarios that follow JSON schemas.
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

    def __init__(self, delay_s: float = 0.0, api_key: str | None = None) -> None:
        self.delay_s = delay_s
        self.api_key = api_key  # None: keyless (any Authorization header, or none, is accepted)
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

            def _error(self, status: int, message: str, kind: str) -> None:
                self._send(status, {"error": {"code": status, "message": message, "type": kind}})  # llama.cpp's shape

            def _stream(self, body: dict[str, Any], include_usage: bool) -> None:
                """``body`` as llama.cpp streams it: server-sent events, one delta at a time."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                choice, base = body["choices"][0], {k: body[k] for k in ("id", "created", "model")}
                message = choice["message"]

                def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
                    chunk = {**base, "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())

                event({"role": "assistant", "content": None})
                for i, call in enumerate(message.get("tool_calls") or []):
                    event({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"], "arguments": ""}}]})
                    event({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
                text = message.get("content") or ""
                for start in range(0, len(text), 16):
                    event({"content": text[start:start + 16]})
                event({}, choice["finish_reason"])
                if include_usage:
                    usage_chunk = {**base, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]}
                    self.wfile.write(f"data: {json.dumps(usage_chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("chat/completions"):
                    return self._error(404, "File Not Found", "not_found_error")
                if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    return self._error(401, "Invalid API Key", "authentication_error")
                with fake.lock:
                    fake.requests.append(req)
                    n = len(fake.requests)
                    seen = sum(1 for r in fake.requests if r.get("model") == req.get("model"))
                scenario = req.get("model", "")
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                if scenario == "down" or (scenario == "flaky" and seen - fake.marks.get(scenario, 0) <= FLAKY_FAILURES):
                    return self._error(503, "Loading model", "unavailable_error")
                messages = req.get("messages", [])
                msg = respond(scenario, messages, req.get("tools"), req.get("response_format"), n, req.get("temperature"))
                message = {"role": "assistant", "content": msg.get("content")}
                if msg.get("tool_calls"):
                    message["tool_calls"] = msg["tool_calls"]
                prompt = 10 * len(messages)
                body = {
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                    "model": served_model(scenario),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if msg.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20,
                              "prompt_tokens_details": {"cached_tokens": max(0, prompt - 10)}},
                }
                if req.get("stream"):
                    return self._stream(body, bool((req.get("stream_options") or {}).get("include_usage")))
                self._send(200, body)

        return Handler


if __name__ == "__main__":  # python tests/fakellm.py [delay_s]  → serve until killed
    import sys

    fake = FakeLLM(delay_s=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0).start()
    print(fake.api_base, flush=True)
    threading.Event().wait()
