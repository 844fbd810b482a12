"""Optional OpenTelemetry traces: a span per run, per model call and per tool execution.

Names and attributes follow the OpenTelemetry GenAI semantic conventions, so
Jaeger, Langfuse or Phoenix show a run as an agent invocation:

    invoke_agent pipeline        gen_ai.operation.name=invoke_agent, gen_ai.agent.name, gen_ai.conversation.id=<run id>
      chat <model>               gen_ai.operation.name=chat, gen_ai.provider.name, gen_ai.request.model,
                                 gen_ai.response.model, gen_ai.usage.input_tokens/output_tokens, finish reasons
      execute_tool <name>        gen_ai.operation.name=execute_tool, gen_ai.tool.name, gen_ai.tool.call.id
        chat <model>             (draft and humanize call the model themselves)

Off unless ``[traces] enabled``; while off nothing of ``opentelemetry`` is
imported (the extra need not be installed) and every hook is one ``None`` check.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import TracesConfig

_F = TypeVar("_F", bound=Callable[..., Any])

_tracer: Any = None  # an opentelemetry Tracer once configure() enabled tracing
_provider_installed = False


def configure(cfg: TracesConfig) -> None:
    """Apply ``[traces]`` (idempotent; the SDK allows one global tracer provider per process)."""
    global _tracer, _provider_installed
    if not cfg.enabled:
        return
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError("[traces] enabled needs the otel extra: pip install 'pipeline[otel]'") from None
    if cfg.exporter != "none" and not _provider_installed:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
        )

        if cfg.exporter == "console":
            exporter = ConsoleSpanExporter(out=sys.stderr)
        else:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError:
                raise ConfigError('[traces] exporter = "otlp" needs opentelemetry-exporter-otlp-proto-http '
                                  '(or exporter = "console" / "none")') from None
            exporter = OTLPSpanExporter()  # endpoint and headers from the standard OTEL_EXPORTER_OTLP_* variables
        provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}))
        provider.add_span_processor(BatchSpanProcessor(exporter))  # flushed at exit by the SDK
        trace.set_tracer_provider(provider)
        _provider_installed = True
    _tracer = trace.get_tracer("pipeline")


def enabled() -> bool:
    return _tracer is not None


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def start(name: str, **attributes: Any) -> Any:
    """Start a span that is not yet current (end it with ``end``); None while tracing is off."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, attributes=_clean(attributes))


def current(span: Any) -> AbstractContextManager[Any]:
    """Make ``span`` the parent of the spans started inside the block."""
    if span is None:
        return nullcontext()
    from opentelemetry import trace

    return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)


def end(span: Any, error: str | None = None, **attributes: Any) -> None:
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attributes(_clean(attributes))
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:500]))
    span.end()


@contextmanager
def span(name: str, client: bool = False, **attributes: Any) -> Iterator[Any]:
    """A child span of the current one; yields None while tracing is off."""
    if _tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(name, kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
                                       attributes=_clean(attributes)) as s:
        yield s


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else model


def traced_chat(complete: _F) -> _F:
    """Decorates ``ChatModel.complete``: a ``chat <model>`` client span with request, response and usage."""

    @functools.wraps(complete)
    def wrapper(self: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if _tracer is None:
            return complete(self, messages, *args, **kwargs)
        with span(f"chat {self.cfg.model}", client=True, **{
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider(self.cfg.model),
            "gen_ai.request.model": self.cfg.model,
            "gen_ai.request.temperature": self.cfg.temperature,
            "server.address": self.cfg.api_base,
        }) as s:
            reply = complete(self, messages, *args, **kwargs)
            s.set_attributes(_clean({
                "gen_ai.response.model": reply.served_model,
                "gen_ai.usage.input_tokens": reply.prompt_tokens,
                "gen_ai.usage.output_tokens": reply.completion_tokens,
                "gen_ai.response.finish_reasons": [reply.finish_reason] if reply.finish_reason else None,
            }))
            return reply

    return cast(_F, wrapper)  # functools.wraps: the same signature, the same result


def traced_tool(execute: _F) -> _F:
    """Decorates ``Toolbox.execute``: an ``execute_tool <name>`` span; a failed execution is an error span."""

    @functools.wraps(execute)
    def wrapper(self: Any, ctx: Any, call: Any, *args: Any, **kwargs: Any) -> Any:
        if _tracer is None:
            return execute(self, ctx, call, *args, **kwargs)
        with span(f"execute_tool {call.name}", **{
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }) as s:
            result = execute(self, ctx, call, *args, **kwargs)
            if not result.ok:
                from opentelemetry.trace import Status, StatusCode

                s.set_attribute("error.type", "capability_error")
                s.set_status(Status(StatusCode.ERROR, str(result.payload.get("error", ""))[:500]))
            return result

    return cast(_F, wrapper)  # functools.wraps: the same signature, the same result
