"""Shared fixtures: a scripted OpenAI-compatible server on 127.0.0.1 and configs that point at it.

The LLM is faked at the HTTP boundary, so every test that runs the agent
goes through real litellm, a real socket and the real ledger.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakellm import FakeLLM  # noqa: E402
from services import postgres_database  # noqa: E402

from pipeline import config as config_mod  # noqa: E402
from pipeline.ledger import Ledger  # noqa: E402
from pipeline.runner import RunOutcome, run_once  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
KEY_ENV = "PIPELINE_TEST_LLM_KEY"

# No test may reach the internet, and litellm must not try to fetch its price list.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(proxy, None)
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


@pytest.fixture(scope="session")
def fake_llm():
    fake = FakeLLM().start()
    yield fake
    fake.stop()


def write_config(directory: Path, api_base: str, scenario: str, extra: str = "",
                 ledger_url: str = "sqlite:///ledger.db") -> Path:
    path = directory / "config.toml"
    path.write_text(f"""
[llm]
model = "openai/{scenario}"
api_base = "{api_base}"
api_key_env = "{KEY_ENV}"
max_retries = 3
backoff_s = 0.01
timeout_s = 10

[ledger]
url = "{ledger_url}"

[topic]
backlog = "{REPO / 'topics.txt'}"

[publish.local]
dir = "site"
base_url = "http://127.0.0.1:8765"
{extra}
""", encoding="utf-8")
    return path


class Harness:
    """Runs scenarios in-process against the fake server, each test in its own directory."""

    def __init__(self, tmp_path: Path, fake: FakeLLM, monkeypatch) -> None:
        self.dir = tmp_path
        self.fake = fake
        monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
        self.env = {KEY_ENV: "sk-test-not-a-real-key"}

    def config(self, scenario: str, extra: str = "", **env: str) -> config_mod.Config:
        path = write_config(self.dir, self.fake.api_base, scenario, extra)
        return config_mod.load(path, environ={**self.env, **env})

    def run(self, scenario: str, extra: str = "", **env: str) -> tuple[RunOutcome, Ledger]:
        cfg = self.config(scenario, extra, **env)
        ledger = Ledger(cfg.ledger_url)
        return run_once(cfg, ledger=ledger), ledger

    @property
    def pages(self) -> list[Path]:
        return sorted((self.dir / "site" / "posts").glob("*.html"))


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database (skipped with one line when no server is reachable)."""
    with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path):
    """The ledger URL on each backend the ledger supports."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/ledger.db"
    else:
        with postgres_database() as url:
            yield url


def pytest_generate_tests(metafunc):
    # A test module that sets LEDGER_BACKENDS = ("sqlite", "postgresql") runs each harness test on each.
    backends = getattr(metafunc.module, "LEDGER_BACKENDS", None)
    if backends and "ledger_backend" in metafunc.fixturenames:
        metafunc.parametrize("ledger_backend", backends, indirect=True)


@pytest.fixture
def ledger_backend(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture
def harness(tmp_path, fake_llm, monkeypatch, ledger_backend):
    h = Harness(tmp_path, fake_llm, monkeypatch)
    if ledger_backend == "postgresql":
        with postgres_database() as url:
            h.env["PIPELINE_LEDGER__URL"] = url
            yield h
    else:
        yield h
