"""Alerts: every outcome other than success reaches a person.

Two sinks, both optional:

* a chat webhook in the format of Slack, Feishu/Lark, DingTalk or WeCom bots;
* healthchecks-style pings: ``<ping_url>/start`` when a run begins and
  ``<ping_url>/<exit code>`` when it ends, so a run that never ends (or never
  starts) is noticed by the pinged service, not by us.

An alert names the channel, the run id and the one command to see what
happened. Sending an alert never fails a run: errors are logged and dropped.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import httpx

from .config import AlertsConfig
from .verify import shared_client

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
        resp = shared_client().post(url, json=chat_payload(fmt, text), timeout=timeout_s)
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
        lines.append(detail[:500])
    if run_id:
        lines.append(f"see: pipeline ledger diff --run {run_id}")
    return "\n".join(lines)


class Alerter:
    def __init__(self, cfg: AlertsConfig) -> None:
        self.cfg = cfg
        self.webhook = cfg.webhook_url or (os.environ.get(cfg.webhook_url_env, "") if cfg.webhook_url_env else "")

    def _ping(self, suffix: str) -> None:
        if not self.cfg.ping_url:
            return
        try:
            shared_client().post(f"{self.cfg.ping_url.rstrip('/')}/{suffix}", timeout=self.cfg.timeout_s)
        except httpx.HTTPError as exc:
            log.warning("health ping /%s failed: %s", suffix, type(exc).__name__)

    def started(self) -> None:
        self._ping("start")

    def finished(self, channel: str, run_id: str | None, status: str, exit_code: int, error: str | None) -> None:
        self._ping(str(exit_code))
        if status != "done":
            self.alert(channel, run_id, f"{status} (exit {exit_code})", error)

    def alert(self, channel: str, run_id: str | None, outcome: str, detail: str | None) -> None:
        if self.webhook:
            post_chat(self.webhook, self.cfg.format, alert_text(channel, run_id, outcome, detail), self.cfg.timeout_s)
