"""The one place a model is called: litellm, imported lazily, with bounded retries.

``import litellm`` costs seconds and hundreds of MB, so it happens on the
first ``ChatModel.complete`` call and nowhere else: ``pipeline ledger diff``
and ``pipeline claims check`` never pay for it. ``LITELLM_LOCAL_MODEL_COST_MAP``
is set before the import so litellm never fetches its price list from the
network (on a closed network it otherwise retries for several seconds).

Retries: 429, 5xx, timeouts and connection errors are retried with
exponential backoff (``[llm] max_retries``, ``backoff_s``); after that the
run ends with ``ProviderUnavailableError`` (exit 5). Authentication and
bad-request errors are not retried: they are the operator's to fix (exit 2).

Deadlines: ``timeout_s`` bounds each read; ``call_deadline_s`` bounds the
whole call, retries and backoff included, and the step's and run's deadlines
bound it too (``pipeline.runtime.deadline``). A stop request abandons the call at once.

The API key is read from the environment variable named by ``[llm] api_key_env``
at call time; it is passed to litellm and never stored or logged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..config import LLMConfig
from ..errors import ConfigError, DeadlineExceeded, ProviderUnavailableError
from ..runtime import deadline
from ..runtime.retry import Backoff
from ..runtime.tracing import traced_chat
from . import calls
from .messages import Reply, ToolCall

log = logging.getLogger(__name__)

_litellm: ModuleType | None = None


def _load_litellm() -> ModuleType:
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        from ..text.redact import install_log_filter

        # litellm's loggers carry their own handlers, past the CLI's: they get the same redaction.
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            install_log_filter(logging.getLogger(name).handlers)
        _litellm = litellm
    return _litellm


LOCAL_PROVIDERS = ("local", "local-raw")


def is_local(model: str) -> bool:
    """``local/…`` and ``local-raw/…``: the embedded model (pipeline.model.local), not a network provider."""
    return model.split("/", 1)[0] in LOCAL_PROVIDERS


class ProviderRefused(ConfigError):
    """The provider refused the request (exit 2); ``kind`` is litellm's exception name: a capability probe
    reads ``BadRequestError`` as "not supported" and anything else (a wrong key) as the operator's to fix."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ChatModel:
    """A chat model behind litellm. One instance per process is enough."""

    def __init__(self, cfg: LLMConfig, sleep: Callable[[float], None] = time.sleep, data_dir: Path | None = None) -> None:
        self.cfg = cfg
        self._sleep = sleep
        self.data_dir = data_dir  # where the local model is assembled (pipeline.model.local)

    def _api_key(self) -> str | None:
        name = self.cfg.api_key_env
        if not name or is_local(self.cfg.model):
            return None
        key = os.environ.get(name)
        if not key:
            raise ConfigError(f"[llm] api_key_env: environment variable {name} is not set (model {self.cfg.model})")
        return key

    @traced_chat
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 response_format: dict[str, Any] | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None, tool_choice: str = "auto",
                 fresh_wording: bool = False) -> Reply:
        """One completion, within ``[llm] call_deadline_s``. ``temperature`` overrides the config's for this
        call (humanize retries vary it); ``seed`` is sent only to the embedded model, whose sampler would
        otherwise repeat itself. ``tool_choice = "none"`` keeps ``tools`` declared (the prompt prefix, and
        providers that refuse a history of tool calls without them) but asks for text only. ``fresh_wording``:
        the reply should not repeat long runs of its prompt (a rewrite); the embedded model's sampler is told so
        (``local.provider.FRESH_WORDING``). Remote APIs have no such sampler (their frequency penalty counts the
        reply's own tokens, not the prompt's), and are sent nothing."""
        what = f"model call to {self.cfg.model}"
        _load_litellm()  # seconds on a cold start: the process's cost, not the provider's, so outside its deadline
        started = time.perf_counter()
        try:
            with deadline.limit(self.cfg.call_deadline_s, what):
                reply = self._complete(messages, tools, response_format, max_tokens, temperature, seed, tool_choice,
                                       fresh_wording)
        except DeadlineExceeded as exc:
            if exc.what != what:
                calls.record(self.cfg.model, latency_ms=_since(started), error=f"deadline: {exc.what}", messages=messages)
                raise  # the step's or the run's deadline: the runner reports it
            calls.record(self.cfg.model, latency_ms=_since(started), error=f"[llm] call_deadline_s = {exc.seconds:g} s",
                         messages=messages)
            raise ProviderUnavailableError(f"LLM provider for {self.cfg.model} gave no complete answer within "
                                           f"[llm] call_deadline_s = {exc.seconds:g} s") from None
        except Exception as exc:
            calls.record(self.cfg.model, latency_ms=_since(started), error=_short(exc), messages=messages)
            raise
        # A capability's own call (draft, humanize, brainstorm) is recorded here; the agent's are its turns.
        calls.record(self.cfg.model, reply, messages=messages)
        return reply

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  response_format: dict[str, Any] | None, max_tokens: int | None,
                  temperature: float | None, seed: int | None, tool_choice: str = "auto",
                  fresh_wording: bool = False) -> Reply:
        api_key = self._api_key()
        litellm = _load_litellm()
        if is_local(self.cfg.model):
            from .local.provider import register_local_provider

            register_local_provider(self.data_dir)
        retryable = (
            litellm.RateLimitError, litellm.InternalServerError, litellm.ServiceUnavailableError,
            litellm.APIConnectionError, litellm.Timeout, litellm.BadGatewayError,
        )
        fatal = (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError, litellm.BadRequestError)
        kwargs: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": messages,
            "timeout": self.cfg.timeout_s,
            "temperature": self.cfg.temperature if temperature is None else temperature,
            "num_retries": 0,  # our loop below owns retries, so the count is honest
        }
        if self.cfg.api_base:
            kwargs["api_base"] = self.cfg.api_base
        if api_key:
            kwargs["api_key"] = api_key
        elif self.cfg.api_base and not is_local(self.cfg.model):
            # A keyless OpenAI-compatible server: the OpenAI client still insists on some key.
            kwargs["api_key"] = "no-key"
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = tool_choice
        if response_format:
            kwargs["response_format"] = response_format
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if seed is not None and is_local(self.cfg.model):
            kwargs["seed"] = seed
        if fresh_wording and is_local(self.cfg.model):
            from .local.provider import FRESH_WORDING

            kwargs.update(FRESH_WORDING)
        stream = self.cfg.stream and not is_local(self.cfg.model)
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}

        backoff = Backoff(self.cfg.max_retries, self.cfg.backoff_s, cap_s=float("inf"), jitter=True)
        attempts = backoff.attempts
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            left = deadline.remaining()
            # The read timeout never outlasts the deadline (the local provider turns it into a decode limit).
            kwargs["timeout"] = self.cfg.timeout_s if left is None else max(0.1, min(self.cfg.timeout_s, left))
            try:
                resp = deadline.call(_streamed if stream else litellm.completion, **kwargs)
            except fatal as exc:
                raise ProviderRefused(f"[llm] model {self.cfg.model}: provider refused the request: {_short(exc)}",
                                      type(exc).__name__) from None
            except retryable as exc:
                if attempt == attempts:
                    raise ProviderUnavailableError(
                        f"LLM provider for {self.cfg.model} unavailable after {attempts} attempts: {_short(exc)}"
                    ) from None
                log.warning("LLM call failed (%s), retry %d/%d", _short(exc), attempt, attempts - 1)
                backoff.pause(attempt, None if self._sleep is time.sleep else self._sleep)
                continue
            return _to_reply(resp, (time.perf_counter() - started) * 1000)
        raise AssertionError("unreachable")


def _streamed(**kwargs: Any) -> Any:
    """A streamed completion read to its end and assembled as one response (usage from its last chunk)."""
    litellm = _load_litellm()
    chunks = list(litellm.completion(**kwargs))
    if not chunks:  # the connection closed before the first event
        raise litellm.APIConnectionError(message="the stream ended before its first chunk", llm_provider="openai",
                                         model=kwargs["model"])
    return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])
def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _to_reply(resp: Any, latency_ms: float) -> Reply:
    choice = resp.choices[0]
    msg = choice.message
    calls = []
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        fn = tc.function
        calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name or "", arguments=fn.arguments or ""))
    usage = getattr(resp, "usage", None)
    return Reply(
        text=msg.content or "",
        tool_calls=calls,
        served_model=getattr(resp, "model", None),
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        latency_ms=latency_ms,
        finish_reason=getattr(choice, "finish_reason", None),
    )
