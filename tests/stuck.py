"""Misbehaving HTTP servers on 127.0.0.1, for deadline, SIGTERM and redaction tests and benches.

Modes:
    silent     accepts the connection, reads the request, never answers
    trickle    answers 200 with headers, then one byte of body every ``interval_s``, forever
    echo401    answers 401 with a body that quotes the request's headers (a proxy echoing the API key)
    echo400    answers 400 quoting the request's headers and body
    record     answers 200 {} and keeps every request body (an alert receiver)

``requests`` counts requests that arrived; ``bodies`` holds what ``record`` kept.
Run as a script (``python tests/stuck.py MODE``) it prints its base URL and serves until killed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StuckServer:
    def __init__(self, mode: str, interval_s: float = 1.0) -> None:
        self.mode = mode
        self.interval_s = interval_s
        self.requests = 0
        self.bodies: list[bytes] = []
        self._stop = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.handle_error = lambda *_: None  # a client that gave up (reset) is what these servers expect

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> StuckServer:
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        stuck = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stuck.requests += 1
                headers = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
                if stuck.mode == "silent":
                    stuck._stop.wait(3600)
                    return
                if stuck.mode == "trickle":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    try:
                        while not stuck._stop.wait(stuck.interval_s):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                    except OSError:
                        pass
                    return
                if stuck.mode == "echo401":
                    msg = {"error": {"message": f"invalid credentials in request: {headers}", "type": "invalid_request_error"}}
                    return self._reply(401, json.dumps(msg).encode())
                if stuck.mode == "echo400":
                    msg = {"error": {"message": f"bad request {headers} body {body.decode(errors='replace')[:2000]}",
                                     "type": "invalid_request_error"}}
                    return self._reply(400, json.dumps(msg).encode())
                if stuck.mode == "record":
                    stuck.bodies.append(body)
                    return self._reply(200, b"{}")
                self._reply(500, b"{}")

            do_POST = do_GET = do_HEAD = _handle  # noqa: N815  (the names http.server dispatches to)

        return Handler


def wait_for_request(server: StuckServer, n: int = 1, timeout_s: float = 60.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if server.requests >= n:
            return True
        time.sleep(0.02)
    return False


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    import sys

    srv = StuckServer(sys.argv[1] if len(sys.argv) > 1 else "silent",
                      float(sys.argv[2]) if len(sys.argv) > 2 else 1.0).start()
    print(srv.base_url, flush=True)
    threading.Event().wait()
