"""Every capability, found once: the modules of the ``pipeline.capabilities`` package, each declaring itself.

A capability module is cheap to import (its heavy work imports lazily), so the light consumers
(config validation, claim rules, facts for the read commands) can ask this registry too.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..ledger import facts

# The package whose every module declares one capability.
PLUGINS = "pipeline.capabilities"

if TYPE_CHECKING:
    from ..config import PublishConfig, RegisterConfig
    from .claims import ClaimRules, Lexicon
    from .toolbox import Capability, Toolbox


@cache
def capabilities() -> tuple[Capability, ...]:
    """All capabilities, in pipeline order."""
    package = importlib.import_module(PLUGINS)  # found by name, as plugins are: nothing here imports a capability

    from .toolbox import Capability

    found: dict[str, Capability] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Capability) and value.fn.__module__ == module.__name__:
                if value.name != info.name:  # the config checks names against the module names
                    raise TypeError(f"capability {value.name!r} must live in a module of its own name, not {info.name!r}")
                if value.name in found:
                    raise TypeError(f"capability {value.name!r} is declared twice")
                found[value.name] = value
    facts.receive_keys({c.name: c.fact for c in found.values() if c.fact})
    return tuple(sorted(found.values(), key=lambda c: (c.order, c.name)))


@cache
def toolbox() -> Toolbox:
    """The capabilities offered to the model, with their schemas built once per process."""
    from .toolbox import Toolbox

    return Toolbox(capabilities())


def names() -> list[str]:
    return [c.name for c in capabilities()]


def get(name: str) -> Capability:
    for c in capabilities():
        if c.name == name:
            return c
    raise KeyError(name)


@cache
def fact_keys() -> Mapping[str, str]:
    """Each capability's recorded value that a claim can quote (``{"publish": "url", …}``); read per fact."""
    return MappingProxyType({c.name: c.fact for c in capabilities() if c.fact})


def lexicons() -> Mapping[str, Lexicon]:
    return {c.name: c.lexicon for c in capabilities()}


def claim_rules(publish: PublishConfig, claims: Mapping[str, list[str]], registration: RegisterConfig) -> ClaimRules:
    """The claim rules of a deployment: the capabilities' lexicons, ``[claims]`` extras, its registration prefix and hosts."""
    from ..errors import ConfigError
    from .claims import ClaimRules

    hosts = list(publish.allowed_domains)
    base_host = urlsplit(publish.local.base_url).hostname
    if base_host:
        hosts.append(base_host)
    try:
        return ClaimRules(lexicons(), claims, registration.prefix, hosts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
