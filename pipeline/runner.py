"""One run, start to finish: wire config → ledger → model → agent loop, then settle the outcome.

The runner is the only place that turns an exception into a run status and
an exit code, and it always writes that status to the run's ledger row
before returning, so ``pipeline ledger runs`` shows every outcome, failures
included. Pre-flight checks (API key present, publisher known, prompts and
claim rules valid) happen before a run row exists: a config error leaves the
ledger untouched.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from urllib.parse import urlsplit

from .agent import AgentLoop, Notify
from .claims import ClaimRules
from .config import Config
from .errors import (AgentHallucinationError, AgentIncompleteError, ConfigError, ExitCode, PipelineError,
                     ProviderUnavailableError)
from .guard import Guard
from .ledger import Ledger
from .llm import ChatModel
from .prompts import Prompts
from .publishers import get_publisher
from .tools import RunContext, Toolbox

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    run_id: str
    status: str
    exit_code: int
    error: str | None = None


def claim_rules(cfg: Config) -> ClaimRules:
    hosts = list(cfg.publish.allowed_domains)
    base_host = urlsplit(cfg.publish.local.base_url).hostname
    if base_host:
        hosts.append(base_host)
    try:
        return ClaimRules(cfg.claims, cfg.registration.prefix, hosts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def preflight(cfg: Config, prompts: Prompts) -> ClaimRules:
    """Everything that can be wrong with the config, found before anything is recorded."""
    rules = claim_rules(cfg)
    get_publisher(cfg)
    ChatModel(cfg.llm)._api_key()
    for name in ("system.md", "task.md", "draft.md", "humanize.md", f"nudges.{cfg.agent.language}.toml"):
        prompts._raw(name)
    return rules


def run_once(cfg: Config, notify: Notify | None = None, channel: str = "default",
             llm: ChatModel | None = None, ledger: Ledger | None = None, prompts: Prompts | None = None) -> RunOutcome:
    from capabilities import ALL

    prompts = prompts or Prompts()
    rules = preflight(cfg, prompts)
    own_ledger = ledger is None
    ledger = ledger or Ledger(cfg.ledger_url, cfg.ledger.busy_timeout_ms)
    llm = llm or ChatModel(cfg.llm)
    toolbox = Toolbox(ALL)
    run = ledger.start_run(model=cfg.llm.model, channel=channel, guard_enabled=cfg.agent.hallucination_guard)
    ctx = RunContext(run.id, cfg, ledger, llm, prompts)
    guard = Guard(ledger, rules, cfg.agent.done_when, prompts, cfg.agent.language, toolbox.names)
    if notify:
        notify("start", run_id=run.id, model=cfg.llm.model)
    status, code, error = "done", ExitCode.DONE, None
    try:
        AgentLoop(ctx, toolbox, guard, cfg.agent, notify, channel).run()
    except AgentHallucinationError as exc:
        status, code, error = "hallucination", exc.exit_code, str(exc)
    except AgentIncompleteError as exc:
        status, code, error = "incomplete", exc.exit_code, str(exc)
    except ProviderUnavailableError as exc:
        status, code, error = "provider_unavailable", exc.exit_code, str(exc)
    except PipelineError as exc:
        status, code, error = "error", exc.exit_code, str(exc)
    except KeyboardInterrupt:
        ledger.finish_run(run.id, "interrupted", 130, "interrupted by the operator")
        raise
    except Exception as exc:  # a bug: record it, keep the traceback in the log
        log.error("run %s crashed:\n%s", run.id, traceback.format_exc())
        status, code, error = "error", ExitCode.INTERNAL, f"{type(exc).__name__}: {exc}"
    ledger.finish_run(run.id, status, int(code), error)
    if status != "done":
        log.error("run %s ended %s (exit %d): %s — see: pipeline ledger diff --run %s", run.id, status, code, error, run.id)
    if own_ledger:
        ledger.close()
    return RunOutcome(run.id, status, int(code), error)
