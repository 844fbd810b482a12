"""Helpers shared by the test modules (tests never import each other or conftest).

``Harness`` runs a scenario (``scenarios.py``) to its outcome in-process, in its
own directory, either on the in-process scripted model (the default: no
litellm, no socket) or through litellm against the HTTP fake (``fakellm``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pipeline import config as config_mod
from pipeline.ledger.writer import Ledger
from pipeline.run.runner import RunOutcome, run_once
from pipeline.testing import Request, ScriptedModel

from fakellm import FakeLLM
from scenarios import scripted

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
KEY_ENV = "PIPELINE_TEST_LLM_KEY"
TEST_KEY = "sk-test-not-a-real-key"
# Where configs of in-process scripted runs point the model: the discard port, closed. Anything that reaches
# for the network model (a CLI subprocess, a missed llm=) fails loudly instead of passing by accident.
OFFLINE_API_BASE = "http://127.0.0.1:9/v1"
# The shipped topics, each written from the scripted model's own notes (its draft's every figure and name is in them).
SOURCED_BACKLOG = TESTS / "fixtures" / "sources" / "topics.txt"


DRAFT_FOR_SCRIPTED_MODEL = """
[draft]
# The scripted article (tests/scenarios.py) is about 400 words: a short target keeps fixtures small.
target_words = 240
target_chars = 480
"""


def write_config(directory: Path, api_base: str, scenario: str, extra: str = "",
                 ledger_url: str = "sqlite:///ledger.db", *, backlog: Path | None = None, max_retries: int = 3,
                 backoff_s: float = 0.01, llm_extra: str = "") -> Path:
    """The config every test and bench run starts from: model ``openai/<scenario>`` at ``api_base``."""
    path = directory / "config.toml"
    path.write_text(f"""
[llm]
model = "openai/{scenario}"
api_base = "{api_base}"
api_key_env = "{KEY_ENV}"
max_retries = {max_retries}
backoff_s = {backoff_s}
timeout_s = 10
{llm_extra}

[ledger]
url = "{ledger_url}"

[topic]
backlog = "{backlog or SOURCED_BACKLOG}"

{DRAFT_FOR_SCRIPTED_MODEL}
[publish.local]
dir = "site"
base_url = "http://127.0.0.1:8765"
{extra}
""", encoding="utf-8")
    return path


def rewrite_calls(ledger: Ledger, run_id: str) -> int:
    """The paragraph rewrites humanize asked the model for in a run (one call per attempt)."""
    import json

    [execution] = [e for e in ledger.executions(run_id) if e.capability == "humanize"]
    return sum(len(p["attempts"]) for p in json.loads(execution.result_json)["paragraphs"])


class Harness:
    """Runs scenarios in-process, each test in its own directory.

    ``fake`` None: the model is ``scenarios.scripted`` (in-process; ``models`` and ``requests`` show what it
    was asked). ``fake`` a FakeLLM: the run goes through litellm over HTTP (``fake.requests``).
    """

    def __init__(self, tmp_path: Path, monkeypatch, fake: FakeLLM | None = None) -> None:
        self.dir = tmp_path
        self.fake = fake
        monkeypatch.setenv(KEY_ENV, TEST_KEY)
        self.env = {KEY_ENV: TEST_KEY}
        self.models: list[ScriptedModel] = []

    @property
    def api_base(self) -> str:
        return self.fake.api_base if self.fake else OFFLINE_API_BASE

    def config(self, scenario: str, extra: str = "", **env: str) -> config_mod.Config:
        path = write_config(self.dir, self.api_base, scenario, extra)
        return config_mod.load(path, environ={**self.env, **env})

    def model(self, scenario: str, cfg: config_mod.Config) -> ScriptedModel | None:
        """The model a run of ``scenario`` gets: a fresh scripted one in-process, None (litellm) over HTTP."""
        if self.fake:
            return None
        model = scripted(scenario, cfg.llm)
        self.models.append(model)
        return model

    def run(self, scenario: str, extra: str = "", **env: str) -> tuple[RunOutcome, Ledger]:
        cfg = self.config(scenario, extra, **env)
        ledger = Ledger(cfg.ledger_url)
        return run_once(cfg, ledger=ledger, llm=self.model(scenario, cfg)), ledger

    @property
    def requests(self) -> list[Request]:
        """Every request the scripted models of this harness were asked, in order."""
        return [r for m in self.models for r in m.requests]

    @property
    def pages(self) -> list[Path]:
        return sorted((self.dir / "site" / "posts").glob("*.html"))


class Recorder:
    """Captures webhook posts and health pings on 127.0.0.1."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, dict | None]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    rec.hits.append((self.path, json.loads(body) if body else None))
                except ValueError:  # a health ping's body is text
                    rec.hits.append((self.path, body.decode()))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() waits up to one interval, and every test using a Recorder shuts it down.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


class CrashWorker:
    """The fork server (tests/crash_worker.py): one fresh child process per publish."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PIPELINE_FAULT"}
        self.proc = subprocess.Popen([sys.executable, str(TESTS / "crash_worker.py")], cwd=TESTS.parent, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def publish(self, config: Path, run_id: str, article_id: int | None, env: dict[str, str],
                call: str = "publish") -> dict[str, Any]:
        request = {"config": str(config), "run_id": run_id, "article_id": article_id, "env": env, "call": call}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
