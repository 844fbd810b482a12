"""Every prompt the system sends lives as a file under ``prompts/``; this loads them.

Templates use ``$name`` placeholders (``string.Template``), so JSON and code
in a prompt need no escaping. A missing placeholder is an error, not a blank.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from string import Template

from .errors import ConfigError

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "prompts"


class Prompts:
    def __init__(self, directory: Path = DEFAULT_DIR) -> None:
        self.dir = directory

    @lru_cache(maxsize=None)
    def _raw(self, name: str) -> str:
        path = self.dir / name
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            raise ConfigError(f"prompt file {path} is missing") from None

    def render(self, name: str, **values: object) -> str:
        try:
            return Template(self._raw(name)).substitute({k: str(v) for k, v in values.items()}).strip()
        except KeyError as exc:
            raise ConfigError(f"prompt {name} needs a value for ${exc.args[0]}") from None

    def table(self, name: str) -> dict[str, str]:
        """A TOML file of several short templates (the nudges)."""
        return tomllib.loads(self._raw(name))
