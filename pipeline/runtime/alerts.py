"""Alerts: every outcome other than success reaches a person.

Two sinks, both optional:

* a chat webhook in the format of Slack, Feishu/Lark, DingTalk or WeCom bots;
* healthchecks-style pings: ``<ping_url>/start?rid=…`` when a run begins and
  ``<ping_url>/<exit code>?rid=…`` when it ends, each with a short text body
  (run id, channel, outcome), so a run that never ends (or never starts) is
  noticed by the pinged service, not by us, and its log names the run.

An alert names the channel, the run id and the one command to see what
happened. Sending an alert never fails a run: errors are logged and dropped.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import Any

import httpx

from ..config import AlertsConfig
from ..errors import clip
from ..text.redact import shown
from . import deadline, http

log = logging.getLogger(__name__)


def chat_payload(fmt: str, text: str) -> dict[str, Any]:
    """The JSON body each bot platform expects for a plain text message."""
    if fmt == "slack":
        return {"text": text}
    if fmt in ("feishu", "lark"):
        return {"msg_type": "text", "content": {"text": text}}
    if fmt in ("dingtalk", "wecom"):
        return {"msgtype": "text", "text": {"content": text}}
    raise ValueError(f"unknown chat format {fmt!r}")


def post_chat(url: str, fmt: str, text: str, timeout_s: float = 5.0) -> bool:
    try:
        # Bounded in total, and not cut short by a stop request: the alert about an interrupted run must go out.
        resp = deadline.http(http.shared().post, url, json=chat_payload(fmt, text), timeout=timeout_s,
                             total_s=timeout_s, interruptible=False)
        resp.raise_for_status()
        return True
    except httpx.HTTPError as exc:
        log.warning("chat webhook failed: %s", type(exc).__name__)  # the URL carries a token: never log it
        return False


def alert_text(channel: str, run_id: str | None, outcome: str, detail: str | None) -> str:
    lines = [f"pipeline: channel {channel} — {outcome}"]
    if run_id:
        lines.append(f"run {run_id}")
    if detail:
        lines.append(clip(detail, 500))
    if run_id:
        lines.append(f"see: pipeline ledger diff --run {run_id}")
    # Details quote error bodies and feed titles: an alert carries no secret and no control sequence.
    return shown("\n".join(lines))


def ping_rid(run_id: str) -> uuid.UUID:
    """The UUID healthchecks.io wants as ``rid``, derived from (and stable for) a run id."""
    import uuid

    return uuid.uuid5(uuid.NAMESPACE_URL, f"pipeline:run:{run_id}")


class Alerter:
    def __init__(self, cfg: AlertsConfig) -> None:
        self.cfg = cfg
        self.webhook = cfg.webhook_url or (os.environ.get(cfg.webhook_url_env, "") if cfg.webhook_url_env else "")

    def _ping(self, suffix: str, run_id: str | None = None, body: str = "") -> None:
        if not self.cfg.ping_url:
            return
        # healthchecks.io: ?rid= pairs a start with its end (it must be a UUID, so one is derived from the
        # run id); the POST body is kept as the ping's log, up to 100 kB.
        params = {"rid": str(ping_rid(run_id))} if run_id else None
        try:
            deadline.http(http.shared().post, f"{self.cfg.ping_url.rstrip('/')}/{suffix}", params=params,
                          content=body.encode("utf-8")[:10_000], timeout=self.cfg.timeout_s,
                          total_s=self.cfg.timeout_s, interruptible=False)
        except httpx.HTTPError as exc:
            log.warning("health ping /%s failed: %s", suffix, type(exc).__name__)

    def started(self, run_id: str | None = None, channel: str = "default", model: str | None = None) -> None:
        self._ping("start", run_id, f"run {run_id} channel {channel}" + (f" model {model}" if model else "") if run_id else "")

    def finished(self, channel: str, run_id: str | None, status: str, exit_code: int, error: str | None) -> None:
        body = [f"run {run_id} channel {channel}: {status} (exit {exit_code})"]
        if error:
            body.append(clip(error, 500))
        if run_id:
            body.append(f"see: pipeline ledger diff --run {run_id}")
        self._ping(str(exit_code), run_id, "\n".join(body))
        if status != "done":
            self.alert(channel, run_id, f"{status} (exit {exit_code})", error)

    def alert(self, channel: str, run_id: str | None, outcome: str, detail: str | None) -> None:
        if self.webhook:
            post_chat(self.webhook, self.cfg.format, alert_text(channel, run_id, outcome, detail), self.cfg.timeout_s)
