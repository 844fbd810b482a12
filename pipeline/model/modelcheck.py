"""Is ``[llm] model`` a model litellm can route? Answered from litellm's own data files, without importing it.

A typo (``gtp-4o-mini``) used to cost a run row, seconds of litellm import and a paragraph of its
error. The installed litellm ships its model map (``model_prices_and_context_window_backup.json``,
the same data ``LITELLM_LOCAL_MODEL_COST_MAP=True`` makes litellm use) and its provider list
(``provider_endpoints_support_backup.json``); both are read as JSON here, in milliseconds.

Accepted: ``local/…`` (the embedded model); any model when ``[llm] api_base`` is set (a self-hosted
or OpenAI-compatible server names its own models) or for providers whose model names are the
operator's own (Ollama, vLLM, Azure deployments …); otherwise ``provider/name`` or a bare ``name``
that the map lists. ``[llm] model_check = false`` skips the check (a model newer than the map).
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..errors import ConfigError

# Providers whose model names are chosen by whoever runs the server or the deployment.
OPEN_ENDED = {"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile", "custom_openai", "openai_like",
              "xinference", "triton", "huggingface", "sagemaker", "sagemaker_chat", "bedrock", "azure", "azure_ai",
              "azure_text", "openrouter", "together_ai", "replicate", "litellm_proxy", "oobabooga", "petals",
              "text-completion-openai", "watsonx", "databricks", "cloudflare", "nvidia_nim", "github", "fireworks_ai"}


def _litellm_dir() -> Path | None:
    spec = find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


MAP_FILE = "model_prices_and_context_window_backup.json"
PROVIDERS_FILE = "provider_endpoints_support_backup.json"


@lru_cache(maxsize=1)
def _map_text() -> str | None:
    where = _litellm_dir()
    try:
        return (where / MAP_FILE).read_text(encoding="utf-8") if where is not None else None
    except OSError:
        return None


@lru_cache(maxsize=1)
def _providers() -> set[str]:
    where = _litellm_dir()
    try:
        return set(json.loads((where / PROVIDERS_FILE).read_text(encoding="utf-8")).get("providers", {})) if where else set()
    except (OSError, ValueError):
        return set()


def _provider_of(text: str, key: str) -> str | None:
    """The ``litellm_provider`` of map entry ``key``, found in the text (a right model costs no JSON parse:
    the map is 3 MB, parsing it a large part of a second on a busy host). None: no such entry."""
    at = text.find(f'\n    "{key}": {{')
    if at < 0:
        return None
    end = text.find("\n    }", at)
    found = re.search(r'"litellm_provider":\s*"([^"]+)"', text[at:end if end > 0 else None])
    return found.group(1) if found else ""


@lru_cache(maxsize=1)
def _maps() -> tuple[dict[str, Any], set[str]] | None:
    """The whole map, parsed: only when a name is wrong and a suggestion is wanted."""
    text = _map_text()
    if text is None:
        return None
    try:
        models = json.loads(text)
    except ValueError:
        return None
    models.pop("sample_spec", None)
    listed = {str(v["litellm_provider"]) for v in models.values() if isinstance(v, dict) and v.get("litellm_provider")}
    return models, _providers() | listed


def _near(word: str, choices: Any) -> str:
    found = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.75)
    return f"; did you mean {' or '.join(repr(f) for f in found)}?" if found else ""


def check(model: str, api_base: str | None, enabled: bool = True) -> None:
    """Raise ConfigError (one line, exit 2) when litellm would not know ``model``."""
    from .llm import LOCAL_PROVIDERS

    provider, _, name = model.partition("/")
    if not enabled or api_base or provider in LOCAL_PROVIDERS:
        return
    text = _map_text()
    if text is None:  # litellm not installed (the run will say so) or its data files moved: nothing to check with
        return
    hint = " (a model newer than litellm's map: [llm] model_check = false)"
    if _provider_of(text, model) is not None:
        return  # listed as written: "gpt-4o-mini", "deepseek/deepseek-chat"
    if name and _provider_of(text, name) == provider:
        return  # "openai/gpt-4o-mini": the map lists "gpt-4o-mini" under openai
    if name and provider in OPEN_ENDED and provider in _providers():
        return
    maps = _maps()
    if maps is None:
        return
    models, providers = maps
    if not name:
        raise ConfigError(f"[llm] model {model!r}: not in litellm's model map{_near(model, models)}{hint}")
    if provider not in providers:
        raise ConfigError(f"[llm] model {model!r}: unknown provider {provider!r}{_near(provider, providers)}")
    if provider in OPEN_ENDED:
        return
    ours = [k for k, v in models.items() if isinstance(v, dict) and v.get("litellm_provider") == provider]
    if not ours:  # the map lists nothing for this provider: it cannot say the name is wrong
        return
    names = {k.split("/", 1)[1] if k.startswith(provider + "/") else k: k for k in ours}
    near = difflib.get_close_matches(name, list(names), n=3, cutoff=0.75)
    mean = f"; did you mean {' or '.join(repr(f'{provider}/{n}') for n in near)}?" if near else ""
    raise ConfigError(f"[llm] model {model!r}: litellm's model map has no {name!r} for {provider}{mean}{hint}")
