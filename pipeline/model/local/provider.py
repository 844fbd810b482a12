"""``local/…`` and ``local-raw/…`` as litellm providers: the embedded model behind the normal call.

The pipeline talks to every model through ``litellm.completion``; registering a
``CustomLLM`` keeps that single path (retries, ledger, guard) for the local model
too. llama.cpp runs in-process through ``xllamacpp.Server``, loaded once per
process on first use (it also opens an HTTP listener: 127.0.0.1, a port the OS
picks, a random API key; only its ``/slots`` endpoint is used, to keep the agent's first prompt across runs:
``saved_prompts``).

    local/qwen2.5-coder-1.5b       tools are turned into one JSON schema (see ``pipeline.model.constrained``)
                                   and the reply back into ``tool_calls``: reliable tool use
    local-raw/qwen2.5-coder-1.5b   tools go to the chat template unconstrained: the model
                                   mostly answers in prose, the failure the guard exists for

Requests without tools (drafting, humanizing) are plain chat completions in both.

Speculative decoding (a 0.5B draft model, ``server_params(path, draft=…)``) stays off: on this 2-core
target ``bench/bench_speculative.py`` measured it 0.29x as fast (6.3 against 21.7 tokens/s, 41 % of drafted
tokens accepted; bench/results/speculative.json): the draft model competes with the writer for the same
two cores, and too few of its guesses are kept to pay for them. Self-speculative decoding (drafts looked up in the
request's own tokens, no second model) is on, and pays for the smaller KV cache (``NGRAM_DRAFT``).
Errors a person must fix (weights or runtime not installed) are raised as
``litellm.BadRequestError``, which ``ChatModel`` does not retry; anything else
litellm would report as a retryable connection error.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...runtime import shutdown
from ..constrained import (
    constrained_response_format,
    decision_messages,
    parse_constrained,
)
from ..loops import LoopGuard
from . import assets
from .saved_prompts import SavedPrompts, first_turn

log = logging.getLogger(__name__)

MODEL = "qwen2.5-coder-1.5b"
PROVIDERS = {"local": True, "local-raw": False}  # provider -> constrained
# Shared by the two slots (``SLOTS``): 2,048 tokens each. The longest call of a run is ~850 tokens (prompt and reply;
# agent turns ~620), and a request over a slot's size fails with llama.cpp's own "exceeds the available context size".
# The KV cache is allocated, and resident, whole: 8,192 held 112 MB more at every moment of a run (bench/bench_memory.py).
N_CTX = 4096
# Self-speculative decoding (``server_params``): the n-gram matched in the request's tokens and the tokens drafted
# after it. Measured on a run's replayed calls: drafts of 8 were kept 44 % and gained nothing (a batch of 8 costs
# more than it saves on two cores); of 3, 65 % and +1-9 %; of 4, 57 % and +3-13 % (bench/bench_decoding.py; three
# runs without drafts measured 11.1-12.1 tokens/s, so these are small gains within the spread).
NGRAM_MATCH = 3
NGRAM_DRAFT = 4
# A decision is ~20 tokens; the cap only bounds a runaway final answer.
DECISION_MAX_TOKENS = 384
_PASSTHROUGH = ("temperature", "top_p", "max_tokens", "stop", "seed",
                "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n")
# llama.cpp's DRY sampler ("don't repeat yourself"): a token that would extend a run already in the context (the
# prompt included) beyond ``dry_allowed_length`` tokens is penalised, more for each token the run grows. Asked to
# rewrite a paragraph shown in its prompt, the embedded model gave it back 93-100 % the same in 2 of 4 Chinese
# attempts at temperature 0.9, and 0.75-0.82 in all 4 with these (names and numbers, a few tokens each, kept).
FRESH_WORDING = {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 3, "dry_penalty_last_n": N_CTX // 2}

_lock = threading.Lock()
_server: Any = None
_saved: SavedPrompts | None = None
_data_dir = Path("var")


def register_local_provider(data_dir: str | os.PathLike[str] | None = None) -> None:
    """Make ``local/…`` and ``local-raw/…`` model strings work in ``litellm.completion``.

    Idempotent and cheap (no model load; imports litellm only if the caller has
    not). ``data_dir`` is where ``models/<gguf>`` is assembled; default ``./var``.
    """
    global _data_dir
    if data_dir is not None:
        _data_dir = Path(data_dir)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    present = {item.get("provider") for item in litellm.custom_provider_map}
    for provider, constrained in PROVIDERS.items():
        if provider not in present:
            litellm.custom_provider_map.append({"provider": provider, "custom_handler": _handler(provider, constrained)})


def prepare(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Check the runtime is installed and the weights assembled (assembling them if not).

    For callers that want a ConfigError (exit 2) and the progress bar before the
    first, timed, model call; the provider does the same lazily.
    """
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        raise ConfigError(f"local model: the llama.cpp runtime (xllamacpp) is not installed; run: {assets.INSTALL_HINT}") from None
    return assets.model_path(Path(data_dir) if data_dir is not None else _data_dir)


def server_params(path: Path, *, api_key: str | None = None, port: int = 0, max_tokens: int = -1,
                  draft: Path | None = None) -> Any:
    """llama.cpp's parameters for the embedded model: the in-process provider's, the real-server test tier's
    (``tests/llamaserver.py``: the same server over its OpenAI-compatible HTTP listener) and
    ``bench/bench_speculative.py``'s (``draft``: a smaller model for speculative decoding)."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(path)
    p.n_ctx = N_CTX
    # The weights are read, not memory-mapped: llama.cpp repacks them for the CPU's vector units into buffers of
    # its own, so a mapped file was the same weights twice in the process (peak RSS 2,055 MB loaded and answering,
    # against 1,459 MB read; the same 120 tokens in 20.8 s and 20.4 s; loading takes ~1 s more; bench/bench_memory.py).
    p.load_mode = xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_NONE
    # Two slots: the agent conversation keeps one, every capability's call uses the other (``SLOTS``), so the
    # drafting and rewriting calls in between never evict the conversation's cached prefix.
    p.n_parallel = 2
    p.cache_prompt = True
    # llama.cpp keeps each prompt a slot moves away from in RAM (up to 8 GiB by default), to restore it if it comes
    # back: ~20 MB per 700-token prompt, never given back (1,431 MB loaded, 1,589 MB after six different prompts on
    # one slot, 1,496 MB with the cache off). Nothing here comes back to a prompt it left: the agent and the
    # capabilities have a slot each (``SLOTS``), the parts of a draft share their slot's cached system turn, and a
    # rewrite's request names the article's title, not its text.
    p.cache_ram_mib = 0
    # The KV cache in Q8_0 (which llama.cpp quantises only with flash attention): ~50 MB less resident at every
    # moment of a run (peak 1,336 -> 1,284 MB replaying a run's calls; a run's peak was over 2.5 GB), 4 % slower to
    # decode alone; the n-gram drafts below win that back (bench/bench_decoding.py, bench/results/decoding.json).
    p.cache_type_k = p.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_Q8_0
    p.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for cpu in (p.cpuparams, p.cpuparams_batch):
        cpu.n_threads = threads
        # Busy-polling workers starve each other on small VMs: measured 0.6 tok/s with
        # the default poll=50 against 20 tok/s with 0, on 2 cores.
        cpu.poll = 0
    # xllamacpp always opens an HTTP listener; keep it local, on a free port, and locked
    # with a key (in-process calls bypass it: measured 401 over HTTP).
    p.hostnames = ["127.0.0.1"]
    p.port = port
    p.api_keys = [api_key or secrets.token_hex(16)]
    p.n_predict = max_tokens  # the server's cap on any one reply (-1: none)
    p.ui = False
    p.endpoint_slots = False
    p.verbosity = -1  # llama.cpp logs would interleave with the CLI's own output
    spec = p.speculative
    # Self-speculative decoding: up to NGRAM_DRAFT tokens that followed the last NGRAM_MATCH tokens earlier in the
    # request (prompt or reply) are proposed and checked in one batch. The embedded model says its prompt's and
    # its own phrases again (names, the section's point, a rewrite's facts): 48-57 % of such drafts were kept, with
    # no second model on the two cores (a 0.5B draft model was 0.29x). With the Q8_0 cache: 0.99x the speed of
    # neither, 49 MB less. Sampling is unchanged: a drafted token is kept only where the model's own sampler picks it.
    spec.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    spec.ngram_simple.size_n, spec.ngram_simple.size_m = NGRAM_MATCH, NGRAM_DRAFT
    spec.draft.n_max = NGRAM_DRAFT
    if draft is not None:
        spec.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        spec.draft.mparams.path = str(draft)
        for cpu in (spec.draft.cpuparams, spec.draft.cpuparams_batch):
            cpu.n_threads, cpu.poll = p.cpuparams.n_threads, 0
    return p


def _load() -> Any:
    global _server, _saved
    with _lock:
        if _server is not None:
            return _server
        import httpx
        import xllamacpp

        path = prepare()
        key = secrets.token_hex(16)  # held by this process only: the listener is 127.0.0.1
        p = server_params(path, api_key=key)
        # The agent's first prompt is saved after its first turn and restored before the next run's
        # (``saved_prompts``): its /slots endpoint, in a directory beside the weights.
        prompts = path.parent / "prompts"
        p.endpoint_slots = True
        p.slot_save_path = f"{prompts}/"
        _server = xllamacpp.Server(p)
        fingerprint = f"{assets.SHA256} {N_CTX} {p.cache_type_k} {getattr(xllamacpp, '__version__', '')}"
        client = httpx.Client(base_url=_server.listening_address, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        _saved = SavedPrompts(prompts, client, fingerprint)
        atexit.register(_close)
        return _server


def _close() -> None:
    # Drop the server before interpreter teardown so its threads are joined in order.
    global _server, _saved
    _server = _saved = None


def _kept(action: Any, *args: Any) -> bool:
    """A saved prompt restored or saved; never a failed call for it (the prompt is then read as before)."""
    try:
        return bool(action(*args))
    except Exception as exc:  # an optimisation that failed costs time, never the call
        log.debug("saved prompt: %s", exc)
        return False


# A call with tools is an agent turn; one without is a capability's (outline, parts, rewrites). Left to llama.cpp's
# choice (the slot whose cached prompt a request shares most, else the least recently used), the rewrite calls
# took the agent's slot: the turn after humanize read its whole conversation again (~20 s, bench 2026-12-03).
SLOTS = {"agent": 0, "capability": 1}


def _request(messages: list[dict[str, Any]], params: dict[str, Any], constrained: bool) -> tuple[dict[str, Any], bool]:
    """The llama.cpp request for one call, and whether its reply is in the JSON protocol."""
    req: dict[str, Any] = {k: params[k] for k in _PASSTHROUGH if params.get(k) is not None}
    tools = params.get("tools")
    req["id_slot"] = SLOTS["agent" if tools else "capability"]
    tool_choice = params.get("tool_choice") or "auto"
    if tools and constrained and tool_choice != "none":
        req["messages"] = decision_messages(messages, tools)
        req["response_format"] = constrained_response_format(tools, tool_choice)
        req.setdefault("max_tokens", DECISION_MAX_TOKENS)
        return req, True
    req["messages"] = messages
    if tools:
        req["tools"], req["tool_choice"] = tools, tool_choice
    if params.get("response_format"):
        req["response_format"] = params["response_format"]
    return req, False


def _timeout_ms(timeout: Any) -> int | None:
    """litellm's ``timeout`` (seconds, or an httpx.Timeout) as milliseconds."""
    if isinstance(timeout, (int, float)) and timeout > 0:
        return max(1, int(timeout * 1000))
    read = getattr(timeout, "read", None)
    return max(1, int(read * 1000)) if isinstance(read, (int, float)) and read > 0 else None


class Stopped(Exception):
    """A stop request (SIGTERM) cut the decode off; its partial text is never a reply."""


def _generate(server: Any, req: dict[str, Any], limit_ms: int | None) -> dict[str, Any]:
    """One chat completion, streamed so that it can be cut off between two tokens.

    At ``limit_ms`` the reply ends there with ``finish_reason`` "length", as at max_tokens: what
    llama.cpp's own ``t_max_predict_ms`` means, except that it fires only after a newline, and a
    constrained decision is one line of JSON, so an abandoned decision kept the cores busy up to
    its max_tokens (measured: 10 s for 300 tokens under a 2 s limit). A stop request raises.
    """
    stop_at = None if limit_ms is None else time.monotonic() + limit_ms / 1000
    content: list[str] = []
    loop = None if req.get("response_format") else LoopGuard()  # prose only: a JSON reply is bounded by its schema
    state: dict[str, Any] = {"finish_reason": None, "usage": None, "error": None, "stopped": False, "cut": False}

    def on_chunk(chunk: dict[str, Any]) -> bool:
        if chunk.get("error"):
            state["error"] = chunk["error"]
            return True
        for choice in chunk.get("choices") or []:
            if text := (choice.get("delta") or {}).get("content"):
                content.append(text)
                if loop is not None and loop.feed(text):
                    state["finish_reason"] = "stop"
                    return True
            state["finish_reason"] = choice.get("finish_reason") or state["finish_reason"]
        state["usage"] = chunk.get("usage") or state["usage"]
        if shutdown.requested():
            state["stopped"] = True
        elif stop_at is not None and time.monotonic() >= stop_at and state["finish_reason"] is None:
            state["cut"] = True
            state["finish_reason"] = "length"
        stop: bool = state["stopped"] or state["cut"]
        return stop

    returned = server.handle_chat_completions({**req, "stream": True, "stream_options": {"include_usage": True}},
                                              on_chunk)
    if isinstance(returned, dict) and returned.get("error"):
        state["error"] = returned["error"]
    if state["error"] is not None:
        return {"error": state["error"]}
    if state["stopped"]:
        raise Stopped("a stop was requested")
    # Cut off early, llama.cpp sends no usage: count the pieces streamed (one token each).
    usage = state["usage"] or {"prompt_tokens": 0, "completion_tokens": len(content)}
    text = loop.text if loop is not None and loop.looped else "".join(content)
    return {"choices": [{"message": {"role": "assistant", "content": text},
                         "finish_reason": state["finish_reason"] or "length"}], "usage": usage}


def _handler(provider: str, constrained: bool) -> Any:
    from litellm.exceptions import BadRequestError, InternalServerError, Timeout
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import (
        ChatCompletionMessageToolCall,
        Function,
        Message,
        Usage,
    )

    class LocalLLM(CustomLLM):
        def completion(self, model: str, messages: list[Any], api_base: str, custom_prompt_dict: dict[str, Any], model_response: Any,
                       print_verbose: Any, encoding: Any, api_key: Any, logging_obj: Any, optional_params: dict[str, Any],
                       acompletion: Any = None, litellm_params: Any = None, logger_fn: Any = None, headers: Any = None,
                       timeout: Any = None, client: Any = None) -> Any:
            # api_key and api_base are ignored: no network. ``timeout`` (ChatModel passes what is left of
            # the call's, step's and run's deadlines) becomes llama.cpp's limit on generation time, so an
            # abandoned decode stops on its own instead of holding the cores.
            if model != MODEL:
                raise BadRequestError(message=f"unknown local model {model!r}; available: {provider}/{MODEL}",
                                              model=model, llm_provider=provider)
            try:
                server = _load()
            except ConfigError as exc:
                raise BadRequestError(message=str(exc), model=model, llm_provider=provider) from None
            req, json_protocol = _request(messages, optional_params, constrained)
            limit_ms = _timeout_ms(timeout)
            saved, name = _saved, None
            if saved is not None and req["id_slot"] == SLOTS["agent"] and first_turn(req["messages"]):
                name = saved.name(req)
                if _kept(saved.restore, SLOTS["agent"], name):
                    name = None  # restored: nothing new to save
            if "tools" in req:  # llama.cpp's own tool calls arrive whole only unstreamed; its limit is the best there is
                if limit_ms:
                    req["t_max_predict_ms"] = limit_ms
                resp = server.handle_chat_completions(req)
            else:
                try:
                    resp = _generate(server, req, limit_ms)
                except Stopped as exc:  # the run is being interrupted: no reply, and the cores are free
                    raise Timeout(message=f"local model: {exc}", model=model, llm_provider=provider) from None
            if "choices" not in resp:
                err = resp.get("error", resp)
                text = err.get("message", json.dumps(err))[:300] if isinstance(err, dict) else str(err)[:300]
                code = err.get("code", 500) if isinstance(err, dict) else 500
                cls = BadRequestError if code == 400 else InternalServerError
                raise cls(message=f"llama.cpp: {text}", model=model, llm_provider=provider)
            if name is not None and saved is not None:
                _kept(saved.save, SLOTS["agent"], name)
            choice = resp["choices"][0]
            msg = choice.get("message") or {}
            finish = choice.get("finish_reason")
            content, calls = msg.get("content"), msg.get("tool_calls") or []
            if json_protocol:
                content, calls = parse_constrained(content or "")
                if calls:
                    finish = "tool_calls"
            model_response.choices[0].message = Message(
                role="assistant", content=content or None,
                tool_calls=[ChatCompletionMessageToolCall(id=c.get("id") or f"call_{i}", type="function",
                                                          function=Function(**c["function"]))
                            for i, c in enumerate(calls)] or None,
            )
            model_response.choices[0].finish_reason = finish
            model_response.model = f"{provider}/{Path(assets.FILENAME).stem}"
            usage = resp.get("usage") or {}
            model_response.usage = Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                                         completion_tokens=usage.get("completion_tokens", 0),
                                         total_tokens=usage.get("total_tokens", 0))
            return model_response

    return LocalLLM()
