"""Every prompt the system sends lives as a file under ``pipeline/prompts/``; this loads them.

``prompts/`` is shipped as package data (the ``pipeline.prompts`` package), so an
installed pipeline finds it without the checkout. Templates use ``$name``
placeholders (``string.Template``), so JSON and code in a prompt need no escaping.
A missing placeholder is an error, not a blank.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from ..errors import ConfigError


def default_dir() -> Traversable:
    """The shipped prompts: ``pipeline/prompts/``, shipped as package data."""
    return resources.files("pipeline.prompts")


class Prompts:
    def __init__(self, directory: Path | Traversable | None = None) -> None:
        self.dir = default_dir() if directory is None else directory
        self._cache: dict[str, str] = {}

    def _raw(self, name: str) -> str:
        if name not in self._cache:
            path = self.dir / name
            try:
                self._cache[name] = path.read_text(encoding="utf-8")
            except OSError:
                raise ConfigError(f"prompt file {path} is missing") from None
        return self._cache[name]

    def render(self, name: str, **values: object) -> str:
        try:
            return Template(self._raw(name)).substitute({k: str(v) for k, v in values.items()}).strip()
        except KeyError as exc:
            raise ConfigError(f"prompt {name} needs a value for ${exc.args[0]}") from None

    def table(self, name: str) -> dict[str, str]:
        """A TOML file of several short templates (the nudges)."""
        return tomllib.loads(self._raw(name))
