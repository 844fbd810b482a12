"""Issue 14: hostile input. No text can crash a run or reach a terminal, a feed or the ledger as anything but text,
and no configured secret is stored, printed, alerted or logged, whatever a remote system echoes back."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipeline import config as config_mod
from pipeline.ledger.writer import Ledger
from pipeline.publishing.publishers.local import LocalSitePublisher
from pipeline.run.events import RunObserver
from pipeline.run.runner import run_once
from pipeline.text.content import normalize_title

from scenarios import scripted
from stuck import StuckServer, closed_port
from support import KEY_ENV, OFFLINE_API_BASE, SOURCED_BACKLOG, write_config

# Everything a feed title can carry: Rich markup (a closing tag alone raises MarkupError), ANSI and OSC
# sequences (a window title set by a feed), BEL, a C1 CSI, a right-to-left override, HTML, a path.
HOSTILE = ("[/] [link=https://evil.example]click[/link] [bold red]loud \x1b]0;pwned\x07\x1b[31mred\x1b[0m "
           "\x9b31m \u202eexe.txt <script>alert(1)</script> ../../etc/passwd")
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


NOTES = SOURCED_BACKLOG.parent / "notes.md"  # what the scripted model's article is written from


def config_text(directory: Path, api_base: str, scenario: str, backlog: Path, extra: str = "") -> Path:
    return write_config(directory, api_base, scenario, extra, backlog=backlog, max_retries=1)


def webhook_target(url: str, secret_env: str | None = None) -> str:
    """Config lines publishing to the webhook at ``url``, once (no retry)."""
    secret = f'secret_env = "{secret_env}"\n' if secret_env else ""
    return f"""
[publish]
target = "webhook"
allowed_domains = ["127.0.0.1"]
retries = 0

[publish.webhook]
url = "{url}"
{secret}"""


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    full_env = {**os.environ, KEY_ENV: "sk-test-not-a-real-key", **(env or {})}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_hostile_feed_title_runs_to_exit_0_and_is_shown_inertly(tmp_path, fake_llm):
    from pipeline.capabilities.topic import _clean

    backlog = tmp_path / "backlog.txt"
    backlog.write_text(f"{HOSTILE} | an angle | {NOTES}\n", encoding="utf-8")
    cfg = config_text(tmp_path, fake_llm.api_base, "honest", backlog)
    run = cli("run", "--config", str(cfg), cwd=tmp_path)
    shown = run.stdout + run.stderr
    assert run.returncode == 0, shown  # before: exit 1, rich.errors.MarkupError on "[/]"
    assert "MarkupError" not in shown and "Traceback" not in shown
    for ch in RAW_CONTROLS:
        assert ch not in shown, repr(ch)
    assert "\\x1b]0;pwned\\x07" in shown and "\\u202e" in shown  # visible, not obeyed
    assert "[/]" in shown and "[link=https://evil.example]" in shown  # printed as text, not taken as markup
    con = sqlite3.connect(tmp_path / "ledger.db")
    [(stored,)] = con.execute("SELECT title FROM topics").fetchall()
    assert stored == _clean(HOSTILE) and "\x1b]0;pwned\x07" in stored  # stored as received (tags and spaces folded, as ever)


@pytest.mark.parametrize("title", [HOSTILE, "A" * 100_000 + " [/]", "<img src=x onerror=alert(1)>", "../../../../etc/passwd",
                                   "\x00\x01\x02\x7f\x85\u2028 nul and friends"])
def test_site_pages_index_and_feed_show_hostile_titles_inertly(tmp_path, title):
    site = LocalSitePublisher(tmp_path / "site", "http://127.0.0.1:8765")
    published = site.publish(key="a" * 64, slug="post", title=title, body_markdown="Body with \x1b[31m and \x0c.",
                              content_hash="b" * 64)
    page = Path(published.local_check).read_text(encoding="utf-8")
    feed = (tmp_path / "site" / "feed.xml").read_text(encoding="utf-8")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    root = ET.fromstring(feed.encode())  # before: "not well-formed (invalid token)" on a control character
    assert root.find("{http://www.w3.org/2005/Atom}entry") is not None
    for text in (page, index, feed):
        assert "<script>" not in text and "<img" not in text
        assert not any(ch in text for ch in ("\x1b", "\x00", "\x07", "\u202e", "\x7f"))
    assert site.find(key="a" * 64, slug="post") is not None  # the page still identifies itself after a crash


def test_untrusted_log_lines_and_alerts_are_inert(caplog):
    import logging

    from pipeline.runtime.alerts import alert_text
    from pipeline.text import redact

    text = alert_text("default", "r1", "error (exit 1)", HOSTILE)
    assert not any(ch in text for ch in RAW_CONTROLS) and "\\x1b" in text
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "feed %s unavailable", (HOSTILE,), None)
    redact.LogFilter().filter(record)
    assert not any(ch in record.getMessage() for ch in RAW_CONTROLS)


@pytest.mark.slow  # seconds: all pairs of a large title set
def test_repeat_index_gives_the_all_pairs_verdicts():
    """The indexed check must be the same check, only faster (issue 14, item 9)."""
    from pipeline.capabilities.topic import Repeats, is_repeat

    rng = random.Random(9)
    words = "cache build test deploy rollback schema index query latency queue retry lock shard log trace".split()
    published = [normalize_title(" ".join(rng.sample(words, rng.randint(1, 6)))) for _ in range(400)]
    published += ["", "a", "why our nightly builds got faster", "为什么 我们的 构建 更快"]
    candidates = [" ".join(rng.sample(words, rng.randint(1, 6))) for _ in range(300)]
    candidates += ["Why our nightly build got faster!", "why our nightly builds got faster", "为什么我们的构建更快", "", "b"]
    for threshold in (0.0, 0.5, 0.85, 1.0):
        repeats = Repeats(published, threshold)
        for c in candidates:
            expected = any(__import__("difflib").SequenceMatcher(None, normalize_title(c), p).ratio() >= threshold
                           for p in published)
            assert repeats(c) == expected, (c, threshold)
    assert is_repeat("why our nightly build got faster", published, 0.85)


# --- secrets ---------------------------------------------------------------------------------------------


def _grep_tree(directory: Path, needle: bytes) -> list[str]:
    hits = []
    for path in directory.rglob("*"):
        if path.is_file() and path.name != "config.toml" and needle in path.read_bytes():
            hits.append(str(path.relative_to(directory)))
    return hits


@pytest.mark.slow
@pytest.mark.timeout(900)  # four full CLI runs: well under a minute idle, minutes on a loaded shared host
def test_canary_secrets_appear_nowhere(tmp_path, fake_llm):
    """Every echoing error path, then grep the ledger, reports, site, logs, alerts and captured output."""
    from pipeline.text import redact

    key, hook_secret, url_token, alert_token = (f"canary{os.urandom(6).hex()}{i}" for i in range(4))
    alerts = StuckServer("record").start()
    servers = [alerts]
    outputs = []
    try:
        alert_url = f"{alerts.base_url}/services/T0/B0/{alert_token}"
        env = {KEY_ENV: key, "CANARY_HOOK_SECRET": hook_secret, "CANARY_ALERT_URL": alert_url}
        extra_alerts = '\n[alerts]\nwebhook_url_env = "CANARY_ALERT_URL"\n'
        backlog = SOURCED_BACKLOG
        # 1 and 2: the model provider echoes the API key in a 401 body, and the whole request in a 400 body.
        for mode in ("echo401", "echo400"):
            echo = StuckServer(mode).start()
            servers.append(echo)
            d = tmp_path / mode
            d.mkdir()
            cfg = config_text(d, f"{echo.base_url}/v1", "x", backlog, extra_alerts)
            run = cli("run", "--config", str(cfg), "--verbose", cwd=d, env=env)
            assert run.returncode == 2 and echo.requests >= 1, run.stdout + run.stderr
            assert "refused" in run.stderr
            outputs.append(run.stdout + run.stderr)
        # 3: a webhook target whose URL carries a token, answering 400 with the request (path, headers, body).
        echo = StuckServer("echo400").start()
        servers.append(echo)
        d = tmp_path / "webhook"
        d.mkdir()
        cfg = config_text(d, fake_llm.api_base, "honest", backlog,
                          extra_alerts + webhook_target(f"{echo.base_url}/hook?token={url_token}", "CANARY_HOOK_SECRET"))
        run = cli("run", "--config", str(cfg), "--verbose", cwd=d, env=env)
        assert run.returncode != 0 and echo.requests >= 1, run.stdout + run.stderr
        outputs.append(run.stdout + run.stderr)
        # 4: a webhook target that is not there (httpx's own exception text).
        d = tmp_path / "closed"
        d.mkdir()
        cfg = config_text(d, fake_llm.api_base, "honest", backlog,
                          extra_alerts + webhook_target(f"http://127.0.0.1:{closed_port()}/hook?token={url_token}"))
        run = cli("run", "--config", str(cfg), "--verbose", cwd=d, env=env)
        assert run.returncode != 0, run.stdout + run.stderr
        outputs.append(run.stdout + run.stderr)
    finally:
        for s in servers:
            s.stop()
    assert alerts.bodies, "no alert reached the receiver"
    alert_text = b"\n".join(alerts.bodies)
    for secret in (key, hook_secret, url_token, alert_token):
        assert all(secret not in out for out in outputs), secret
        assert secret.encode() not in alert_text
        assert _grep_tree(tmp_path, secret.encode()) == []
    assert any(redact.MARK in out for out in outputs)  # the echo was there, and was removed


def test_redaction_covers_every_configured_secret_and_every_ledger_write(tmp_path, monkeypatch):
    from pipeline.text import redact

    redact.clear()
    monkeypatch.setenv("K_LLM", "sk-llm-canary-1234")
    monkeypatch.setenv("K_WP", "wp-app-pass-canary")
    monkeypatch.setenv("K_GHOST", "abcdef:0123456789abcdef0123")
    monkeypatch.setenv("K_ALERT", "https://hooks.example/services/T1/B2/xoxbCANARY123456789")
    path = tmp_path / "c.toml"
    path.write_text("""
[llm]
api_key_env = "K_LLM"
[ledger]
url = "sqlite:///ledger.db"
[publish.wordpress]
password_env = "K_WP"
[publish.ghost]
admin_key_env = "K_GHOST"
[alerts]
webhook_url_env = "K_ALERT"
ping_url = "https://hc-ping.com/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
""", encoding="utf-8")
    cfg = config_mod.load(path)
    redact.remember(cfg.secrets())
    text = ("key sk-llm-canary-1234 pass wp-app-pass-canary ghost 0123456789abcdef0123 "
            "hook xoxbCANARY123456789 ping 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    clean = redact.scrub(text)
    for secret in ("sk-llm-canary-1234", "wp-app-pass-canary", "0123456789abcdef0123", "xoxbCANARY123456789",
                   "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"):
        assert secret not in clean
    ledger = Ledger(cfg.ledger_url)
    run = ledger.start_run("m")
    ledger.add_turn(run.id, "tool", text)
    ledger.finish_run(run.id, "error", 2, text)
    ledger.close()
    raw = (tmp_path / "ledger.db").read_bytes() + (tmp_path / "ledger.db-wal").read_bytes() \
        if (tmp_path / "ledger.db-wal").exists() else (tmp_path / "ledger.db").read_bytes()
    assert b"sk-llm-canary-1234" not in raw and redact.MARK.encode() in raw
    redact.clear()


def test_stored_text_is_kept_exactly_when_it_holds_no_secret(harness):
    from pipeline.text import redact

    outcome, ledger = harness.run("honest")
    assert outcome.status == "done"
    turns = ledger.turns(outcome.run_id)
    assert any("topic" in (t.tool_calls_json or "") for t in turns)
    assert all(redact.MARK not in (t.content or "") for t in turns)


@pytest.fixture(autouse=True)
def _forget_secrets():
    yield
    from pipeline.text import redact

    redact.clear()


def test_run_once_in_process_survives_markup_in_every_title(tmp_path, monkeypatch):
    """The in-process path (the daemon) with titles that are long, HTML and path-like."""
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    backlog = tmp_path / "backlog.txt"
    backlog.write_text("[/]" * 40_000 + f" | | {NOTES}\n", encoding="utf-8")
    cfg = config_mod.load(config_text(tmp_path, OFFLINE_API_BASE, "honest", backlog))
    outcome = run_once(cfg, observer=RunObserver(), llm=scripted("honest", cfg.llm))
    assert outcome.exit_code == 0, outcome.error
    con = sqlite3.connect(tmp_path / "ledger.db")
    [(title,)] = con.execute("SELECT title FROM topics").fetchall()
    assert title.startswith("[/][/]") and len(title) == 300
    json.dumps(title)
