"""Configuration: one TOML file, overridden by the environment, validated once.

Where the file comes from: ``--config PATH``, else ``$PIPELINE_CONFIG``, else
``./config.toml``. Any key can be overridden as ``PIPELINE_<SECTION>__<KEY>``
(``PIPELINE_LLM__MODEL=openai/gpt-4o-mini``, ``PIPELINE_PUBLISH_LOCAL__DIR=...``
for ``[publish.local]``); the value is read as a TOML literal when it parses as
one (``true``, ``3``, ``["a","b"]``) and as a plain string otherwise. The
incident fix's switches ``AGENT_HALLUCINATION_GUARD`` and
``AGENT_HALLUCINATION_MAX_NUDGES`` are honoured too and win over everything.

A bad file or value raises ``ConfigError`` with one line naming the key.
Relative paths in the file are resolved against the file's own directory, so
cron (which starts in ``$HOME``) sees the same files as an interactive shell.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError

CAPABILITIES = ("topic", "draft", "humanize", "publish", "register", "report")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LLMConfig(_Section):
    model: str = "openai/gpt-4o-mini"
    api_base: str | None = None
    # Name of the environment variable holding the key; "" for keyless providers
    # (ollama, a local server). The key itself is never read from a file.
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    backoff_s: float = Field(1.0, ge=0)
    temperature: float = Field(0.3, ge=0, le=2)


class LedgerConfig(_Section):
    url: str = "sqlite:///var/ledger.db"
    busy_timeout_ms: int = Field(5000, ge=0)


class AgentConfig(_Section):
    max_turns: int = Field(24, ge=1, le=500)
    done_when: list[str] = Field(default_factory=lambda: ["publish", "register"])
    hallucination_guard: bool = True
    hallucination_max_nudges: int = Field(2, ge=0, le=20)
    language: Literal["en", "zh"] = "en"

    @field_validator("done_when")
    @classmethod
    def _known_capabilities(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}; known: {list(CAPABILITIES)}")
        return value


class TopicConfig(_Section):
    backlog: str | None = "topics.txt"
    niche: str = "practical software engineering"


class DraftConfig(_Section):
    language: Literal["en", "zh"] = "en"
    min_chars: int = Field(300, ge=1)
    max_chars: int = Field(6000, ge=1)
    audience: str = "working software engineers"
    style: str = "plain, concrete, first-hand"


class HumanizeConfig(_Section):
    threshold: float = Field(60.0, ge=0, le=100)
    max_rewrites: int = Field(1, ge=0, le=5)


class LocalPublishConfig(_Section):
    dir: str = "var/site"
    base_url: str = "http://127.0.0.1:8765"


class PublishConfig(_Section):
    target: str = "local"
    allowed_domains: list[str] = Field(default_factory=lambda: ["127.0.0.1", "localhost"])
    verify_timeout_s: float = Field(5.0, gt=0)
    local: LocalPublishConfig = Field(default_factory=LocalPublishConfig)


class RegisterConfig(_Section):
    prefix: str = Field("CT", pattern=r"^[A-Z]{1,8}$")
    timezone: str = "UTC"


class Config(_Section):
    llm: LLMConfig = Field(default_factory=LLMConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    topic: TopicConfig = Field(default_factory=TopicConfig)
    draft: DraftConfig = Field(default_factory=DraftConfig)
    humanize: HumanizeConfig = Field(default_factory=HumanizeConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    # `register` would shadow BaseModel.register; the TOML table is still [register].
    registration: RegisterConfig = Field(default_factory=RegisterConfig, alias="register")
    # Extra claim rules: capability -> list of regular expressions, added to the built-ins.
    claims: dict[str, list[str]] = Field(default_factory=dict)

    # Where the file was read from; relative paths resolve against its directory.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    @field_validator("claims")
    @classmethod
    def _claims_name_capabilities(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(set(value) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}")
        return value

    def path(self, value: str | os.PathLike[str]) -> Path:
        """Resolve a configured path against the config file's directory."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def ledger_url(self) -> str:
        """The ledger URL with a relative SQLite path made absolute."""
        url = self.ledger.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/") and ":memory:" not in url:
            return prefix + str(self.path(url[len(prefix):]))
        return url


_SWITCHES = {
    "AGENT_HALLUCINATION_GUARD": ("agent", "hallucination_guard"),
    "AGENT_HALLUCINATION_MAX_NUDGES": ("agent", "hallucination_max_nudges"),
}


def _literal(raw: str) -> Any:
    """Read an env value as a TOML literal when it is one, else as a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _set(data: dict[str, Any], dotted: list[str], value: Any) -> None:
    node = data
    for part in dotted[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"config: cannot override {'.'.join(dotted)}: {part} is not a table")
        node = nxt
    node[dotted[-1]] = value


def _env_overrides(data: dict[str, Any], environ: dict[str, str]) -> None:
    for name, raw in sorted(environ.items()):
        if not name.startswith("PIPELINE_") or "__" not in name or name == "PIPELINE_CONFIG":
            continue
        section, _, key = name[len("PIPELINE_"):].partition("__")
        # Section names hold no underscores, so PIPELINE_PUBLISH_LOCAL__DIR is publish.local.dir.
        _set(data, [*section.lower().split("_"), key.lower()], _literal(raw))
    for name, dotted in _SWITCHES.items():
        if name in environ:
            _set(data, list(dotted), _literal(environ[name].strip().lower()))


def _describe(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    where = f"[{'.'.join(loc[:-1])}] {loc[-1]}" if len(loc) > 1 else (loc[0] if loc else "?")
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    return f"{source}: {where}: {msg}"


def resolve_path(explicit: str | os.PathLike[str] | None, environ: dict[str, str] | None = None) -> Path:
    environ = dict(os.environ if environ is None else environ)
    if explicit:
        return Path(explicit)
    if environ.get("PIPELINE_CONFIG"):
        return Path(environ["PIPELINE_CONFIG"])
    return Path("config.toml")


def load(explicit: str | os.PathLike[str] | None = None, environ: dict[str, str] | None = None) -> Config:
    """Load, override and validate the configuration. Raises ConfigError (exit 2)."""
    environ = dict(os.environ if environ is None else environ)
    path = resolve_path(explicit, environ)
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    elif explicit or environ.get("PIPELINE_CONFIG"):
        raise ConfigError(f"{path}: no such config file")
    _env_overrides(data, environ)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path))) from None
    cfg.base_dir = path.resolve().parent
    return cfg
