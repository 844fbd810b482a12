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
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError


def capability_names() -> list[str]:
    """The capabilities' names, from the module names of ``pipeline/capabilities`` without importing them.

    A capability lives in a module of its own name (the catalog, ``pipeline.tools.catalog``, refuses any
    other), so the config can check the names it is given without reaching up to the layers that run them.
    """
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent / "capabilities")]))


def resolve(base_dir: Path, value: str | os.PathLike[str]) -> Path:
    """A configured path resolved against ``base_dir``, the config file's directory."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base_dir / p)


def _zone(value: str) -> str:
    """A known IANA time zone, checked when the file is read, not at ``register`` after publishing."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {value!r}") from None
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _bools_are_booleans(cls, value: Any, info: Any) -> Any:
        """A switch is ``true`` or ``false``: pydantic would read "yes", "on", "1" or 0 as one, silently."""
        field = cls.model_fields.get(info.field_name) if info.field_name else None
        annotation = field.annotation if field is not None else None
        optional = annotation == (bool | None)
        if (annotation is bool or optional) and not isinstance(value, bool) and not (optional and value is None):
            raise ValueError(f"expected true or false, got {value!r}")
        return value


class LLMConfig(_Section):
    model: str = Field("openai/gpt-4o-mini", min_length=1, pattern=r"\S")
    api_base: str | None = None
    # Name of the environment variable holding the key; "" for keyless providers
    # (ollama, a local server). The key itself is never read from a file.
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    backoff_s: float = Field(1.0, ge=0)
    temperature: float = Field(0.3, ge=0, le=2)
    # Total time one model call may take, retries and backoff included (timeout_s bounds each read
    # only: a server trickling a byte at a time never trips it). 0 = no limit.
    call_deadline_s: float = Field(300.0, ge=0)
    # Does the provider honour response_format json_schema? Unset: litellm's model map, else a probe (pipeline.model.probe).
    json_schema: bool | None = None
    # Ask for streamed replies (server-sent events), assembled before use; for servers and proxies that
    # answer best streamed. timeout_s then bounds each gap between chunks.
    stream: bool = False
    # Refuse, before a run starts, a model litellm's model map does not know (a typo). false: a model newer
    # than the installed litellm's map. A set api_base (a self-hosted server) is never checked.
    model_check: bool = True


class LedgerConfig(_Section):
    url: str = "sqlite:///var/ledger.db"
    busy_timeout_ms: int = Field(5000, ge=0)


class AgentConfig(_Section):
    max_turns: int = Field(24, ge=1, le=500)
    done_when: list[str] = Field(default_factory=lambda: ["publish", "register"])
    hallucination_guard: bool = True
    hallucination_max_nudges: int = Field(2, ge=0, le=20)
    language: Literal["en", "zh"] = "en"
    # Guard escalation: after a nudge ("after_nudge") or always, a turn is asked as one JSON-schema
    # constrained decision (a tool call or a final answer) when the provider supports json_schema.
    # The local provider constrains every turn itself.
    constrained_tools: Literal["off", "after_nudge", "always"] = "after_nudge"
    # The same tool failing the same way this many times in a row (no progress in between) ends the
    # run as incomplete, reason `stuck`; one repeat before that gets a targeted nudge.
    stuck_after: int = Field(3, ge=2, le=20)
    # Total time for one step (a model turn or a capability, its model and platform calls included)
    # and for the whole run; past either the run ends (exit 124) and releases the channel. 0 = no limit.
    step_deadline_s: float = Field(600.0, ge=0)
    run_deadline_s: float = Field(1800.0, ge=0)

    @field_validator("done_when")
    @classmethod
    def _known_capabilities(cls, value: list[str]) -> list[str]:
        known = capability_names()
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}; known: {known}")
        return value


class TopicConfig(_Section):
    # A text file ("title | angle" a line) or a CSV with a title,angle,keywords header.
    backlog: str | None = "topics.txt"
    # RSS/Atom feed URLs (or local files). Feed text is untrusted: quoted to the model, never obeyed.
    feeds: list[str] = Field(default_factory=list)
    feed_timeout_s: float = Field(10.0, gt=0)
    max_feed_items: int = Field(30, ge=1)
    niche: str = "practical software engineering"
    # A candidate this similar (0..1, difflib ratio of normalised titles) to a published topic is a repeat.
    similarity_threshold: float = Field(0.85, ge=0, le=1)


class DraftConfig(_Section):
    language: Literal["en", "zh"] = "en"
    # The length the prompts ask for: words for English, characters for Chinese. A draft shorter than
    # min_ratio × target, or longer than max_ratio × target, fails the completeness check.
    target_words: int = Field(800, ge=50)
    target_chars: int = Field(1600, ge=100)
    min_ratio: float = Field(0.875, gt=0, le=1)
    max_ratio: float = Field(2.0, ge=1)
    # Sections the outline asks for (the outline's schema allows 3-6).
    sections: int = Field(4, ge=3, le=6)
    # A part cut by max_tokens is continued from its last full sentence this often; still cut, it is rewritten.
    continuations: int = Field(2, ge=0, le=5)
    audience: str = "working software engineers"
    style: str = "plain and concrete"

    def target(self) -> int:
        return self.target_chars if self.language == "zh" else self.target_words

    def min_length(self) -> int:
        return int(self.target() * self.min_ratio)

    def max_length(self) -> int:
        return int(self.target() * self.max_ratio)


class HumanizeConfig(_Section):
    # None: the calibrated pass mark of the article's language (pipeline/score/calibration/score.json, rule in the README).
    threshold: float | None = Field(None, ge=0, le=100)
    # A scoring GGUF elsewhere than [daemon] state_dir/models; it must be the one the score is calibrated on.
    scoring_model: str | None = None
    # The weakest paragraphs (by their own score) rewritten per humanize call, one model call each;
    # a paragraph's rewrite is tried up to 1 + max_rewrites times (rejected or not better: again, hotter).
    paragraphs: int = Field(4, ge=1, le=20)
    max_rewrites: int = Field(1, ge=0, le=5)
    # Sampling of the first rewrite; each retry is hotter. Not [llm] temperature, which suits tool
    # decisions: at 0.3 the embedded model returned one draft verbatim in 6 tries of 6 (three prompts).
    temperature: float = Field(0.9, ge=0, le=2)

    def pass_mark(self, language: str) -> float:
        """The score an article in ``language`` needs: the configured threshold, else the calibrated one."""
        if self.threshold is not None:
            return self.threshold
        from .score.scoring import current

        return current().threshold(language)


class LocalPublishConfig(_Section):
    dir: str = "var/site"
    # Where readers reach the site: the feed's links are absolute (Atom requires it); pages link relatively.
    base_url: str = "http://127.0.0.1:8765"
    # The site's name (header, <title>, feed title) and the author shown on posts and in the feed.
    title: str = "Posts"
    author: str = ""


class WordPressPublishConfig(_Section):
    # Site root (https://blog.example.com); the REST API lives under /wp-json/wp/v2/.
    url: str = ""
    username: str = ""
    # Name of the variable holding the application password; the password is never read from a file.
    password_env: str = "WORDPRESS_APP_PASSWORD"
    # "draft" posts are not public, so their link answers 404 and stays unverified.
    status: Literal["draft", "publish"] = "publish"


class GhostPublishConfig(_Section):
    url: str = ""
    # Name of the variable holding the Admin API key "id:secret".
    admin_key_env: str = "GHOST_ADMIN_KEY"
    status: Literal["draft", "published"] = "published"


class WebhookPublishConfig(_Section):
    url: str = ""
    # Optional: name of the variable holding an HMAC secret; when set, each body is signed
    # in the X-Pipeline-Signature header ("sha256=<hex>").
    secret_env: str = ""


class WeChatPublishConfig(_Section):
    """A WeChat Official Account (公众号): draft/add, then freepublish/submit, then freepublish/get."""

    # The API host; tests point it at a contract fake on 127.0.0.1.
    api_base: str = "https://api.weixin.qq.com"
    appid: str = ""
    # Name of the variable holding the AppSecret; the secret is never read from a file.
    secret_env: str = "WECHAT_APP_SECRET"
    # Cover image file (jpg/png, 2.35:1, e.g. 900x383); "" generates a plain one locally per article.
    cover_image: str = ""
    author: str = ""
    # The article's 阅读原文 link ("" for none).
    content_source_url: str = ""
    # How long one run polls freepublish/get before ending "submitted" (exit 9), and the first pause.
    poll_budget_s: float = Field(120.0, ge=0)
    poll_interval_s: float = Field(3.0, gt=0)
    # After a crash between submit and recording its publish_id, how long recovery waits for the
    # article to appear in freepublish/batchget before it submits again (publishing takes minutes).
    resubmit_after_min: float = Field(60.0, ge=0)
    # Refresh the shared access token this long before it expires.
    token_margin_s: float = Field(300.0, ge=0)
    # Each run asks again about the articles verified in the last N days: one the account deleted
    # (publish_status 5) or the platform blocked (6) becomes "removed", with an alert. 0: never.
    recheck_days: float = Field(3.0, ge=0)


class DisclosureConfig(_Section):
    """What a published article says about being machine-written (``pipeline.text.disclosure``)."""

    enabled: bool = True
    en: str = Field("This article was written by an AI language model.", min_length=1)
    zh: str = Field("本文由人工智能生成。", min_length=1)
    # The AIGC metadata's ContentProducer (GB 45438-2025): the service provider's name or filing number.
    producer: str = Field("pipeline", min_length=1)


class PublishConfig(_Section):
    target: str = "local"
    # "manual": a run stops after humanize in the awaiting_review state (exit 8) with a preview; an editor's
    # `pipeline review approve RUN` publishes, registers and reports it. "auto": publish at once.
    review: Literal["auto", "manual"] = "auto"
    # Where previews of would-be posts go (review and run --dry-run), one directory per run.
    preview_dir: str = "var/preview"
    allowed_domains: list[str] = Field(default_factory=lambda: ["127.0.0.1", "localhost"])
    verify_timeout_s: float = Field(5.0, gt=0)
    # Remote platforms: per-request timeout, and how often a 5xx/timeout is retried.
    timeout_s: float = Field(15.0, gt=0)
    retries: int = Field(2, ge=0, le=5)
    backoff_s: float = Field(0.5, ge=0)
    # A pending publication of a run still "running" after this long is presumed crashed.
    recover_after_min: float = Field(60.0, gt=0)
    # Per run: after this many failed platform requests (refused, timed out, 5xx, 429), or this many
    # seconds after the first one, publish stops calling the platform and the run ends with exit 6.
    max_failed_attempts: int = Field(6, ge=1, le=100)
    unavailable_after_s: float = Field(30.0, gt=0)
    local: LocalPublishConfig = Field(default_factory=LocalPublishConfig)
    wordpress: WordPressPublishConfig = Field(default_factory=WordPressPublishConfig)
    ghost: GhostPublishConfig = Field(default_factory=GhostPublishConfig)
    webhook: WebhookPublishConfig = Field(default_factory=WebhookPublishConfig)
    wechat: WeChatPublishConfig = Field(default_factory=WeChatPublishConfig)
    disclosure: DisclosureConfig = Field(default_factory=DisclosureConfig)


class RegisterConfig(_Section):
    prefix: str = Field("CT", pattern=r"^[A-Z]{1,8}$")
    timezone: str = "UTC"

    _known_zone = field_validator("timezone")(_zone)


class ChannelConfig(_Section):
    """One independent pipeline sharing the ledger: its schedule and what it overrides."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    cron: str = "0 9 * * *"
    timezone: str = "UTC"
    # Tables merged over the top-level ones for this channel only.
    agent: dict[str, Any] = Field(default_factory=dict)
    topic: dict[str, Any] = Field(default_factory=dict)
    draft: dict[str, Any] = Field(default_factory=dict)
    humanize: dict[str, Any] = Field(default_factory=dict)
    publish: dict[str, Any] = Field(default_factory=dict)
    registration: dict[str, Any] = Field(default_factory=dict, alias="register")

    _known_zone = field_validator("timezone")(_zone)


class ReportConfig(_Section):
    # Each run's report and each daily summary are also written here as Markdown ("" to skip).
    markdown_dir: str = "var/reports"
    # Chat webhook for reports (Slack / Feishu / Lark / DingTalk / WeCom bot formats); env var name keeps the token out.
    webhook_url: str = ""
    webhook_url_env: str = ""
    format: Literal["slack", "feishu", "lark", "dingtalk", "wecom"] = "slack"


class DaemonConfig(_Section):
    # Locks and the daemon's job store live here (relative to the config file).
    state_dir: str = "var"
    # What fires this deployment's ticks, for `pipeline status`: "daemon" (`pipeline daemon`; it proves it is
    # alive with a heartbeat row in the ledger), "cron" (a crontab running `pipeline run`; give cron_since),
    # or "manual" (nothing scheduled: no tick is ever overdue).
    scheduler: Literal["manual", "daemon", "cron"] = "manual"
    # scheduler = "cron": when the crontab was installed (ISO time with offset). Ticks before it are not overdue.
    cron_since: str = ""
    # The daemon writes its heartbeat (and checkpoints a SQLite ledger's WAL) this often; `pipeline status`
    # calls it dead when the last beat is older than three of these.
    heartbeat_s: float = Field(30.0, ge=1, le=3600)
    # Schedule of the implicit "default" channel when no [[channels]] are declared.
    cron: str = "0 9 * * *"
    timezone: str = "UTC"
    # A tick missed by more than this (daemon down) is reported as missed, not run.
    misfire_grace_time_s: int = Field(6 * 3600, ge=1)
    # "thread": runs share the daemon process, its model and its ledger connection pool (measured
    # 1.2x a single run for 20 channels due together on 2 cores). "process": a pool of worker
    # processes, started and warmed at daemon start (each imports litellm: ~200 MB and seconds of CPU
    # each), for hosts with many cores whose runs are CPU-heavy.
    executor: Literal["process", "thread"] = "thread"
    # Pool size; 0 = one per channel (at most 32), or 1 when the model is local (it needs every core).
    workers: int = Field(0, ge=0, le=256)
    # `pipeline status` calls a channel overdue when its last tick is this old and no run started for it.
    overdue_after_s: int = Field(900, ge=0)
    # With a PostgreSQL ledger, several daemons may run: one leads, the others stand by and try to
    # take the lead this often (seconds). A standby takes over within about this after the leader dies.
    standby_poll_s: float = Field(5.0, gt=0)

    _known_zone = field_validator("timezone")(_zone)

    @field_validator("cron_since")
    @classmethod
    def _iso_time(cls, value: str) -> str:
        if value:
            try:
                when = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an ISO time (e.g. 2026-12-01T09:00:00+00:00)") from None
            if when.tzinfo is None:
                raise ValueError(f"{value!r} has no UTC offset (e.g. 2026-12-01T09:00:00+00:00)")
        return value

    @model_validator(mode="after")
    def _cron_needs_since(self) -> DaemonConfig:
        if self.scheduler == "cron" and not self.cron_since:
            raise ValueError('scheduler = "cron" needs cron_since: when the crontab was installed '
                             '(e.g. cron_since = "2026-12-01T09:00:00+00:00")')
        return self

    def cron_began(self) -> datetime | None:
        return datetime.fromisoformat(self.cron_since) if self.cron_since else None


class EngineConfig(_Section):
    # "local": a run executes in the process that starts it (`pipeline run`, the daemon's pool).
    # "celery": `pipeline daemon` only schedules; each due tick is a Celery task that `pipeline worker` runs.
    kind: Literal["local", "celery"] = "local"
    # Redis (default) or RabbitMQ (amqp://guest:guest@127.0.0.1:5672//). broker_url_env names a variable
    # holding the URL instead, to keep credentials out of the file.
    broker_url: str = "redis://127.0.0.1:6379/0"
    broker_url_env: str = ""
    queue: str = "pipeline"
    # Redis: a delivered task not acknowledged within this is given to another worker; it must exceed
    # the longest run (RabbitMQ redelivers when the worker's connection closes instead).
    visibility_timeout_s: int = Field(3600, ge=10)
    # A queued tick that no worker has claimed after this is queued again (a broker that lost it on a
    # restart, e.g. Redis without persistence); a duplicate is harmless, the run claims its tick once.
    resend_after_s: int = Field(120, ge=5)
    # A running tick's claim is a lease its worker renews every lease_s / 3 (on the ledger's clock). A
    # lapsed lease with the channel lock free means the worker died: the leading daemon queues the tick
    # again, and its delivery settles the dead run (no second post) or runs the tick. A dead worker is
    # noticed within lease_s + the re-queue interval (lease_s / 3), not at visibility_timeout_s.
    lease_s: int = Field(30, ge=3, le=3600)
    # A task whose ledger could not be reached is retried with exponential backoff, at most this often.
    max_retries: int = Field(5, ge=0, le=50)
    # Worker processes of `pipeline worker` (each loads the model and the ledger once); 0: one per core,
    # or 1 when the model is local (it needs every core).
    concurrency: int = Field(0, ge=0, le=256)

    def broker(self) -> str:
        if self.broker_url_env:
            value = os.environ.get(self.broker_url_env, "")
            if not value:
                raise ConfigError(f"[engine] broker_url_env: ${self.broker_url_env} is not set")
            return value
        return self.broker_url


class AlertsConfig(_Section):
    # Chat webhook for every outcome other than success. Name an env var to keep the URL's token out of the file.
    webhook_url: str = ""
    webhook_url_env: str = ""
    format: Literal["slack", "feishu", "lark", "dingtalk", "wecom"] = "slack"
    # healthchecks.io-style base URL: <ping_url>/start when a run begins, <ping_url>/<exit code> when it ends.
    ping_url: str = ""
    timeout_s: float = Field(5.0, gt=0)


class MetricsConfig(_Section):
    # The daemon serves Prometheus metrics at http://<listen>/metrics ("" = off), e.g. "127.0.0.1:9464".
    listen: str = Field("", pattern=r"^$|^[^\s:]*:\d{1,5}$")
    # After each `pipeline run` (cron), write the same metrics here for node_exporter's textfile collector.
    textfile: str = ""
    # ... or push them to a Prometheus Pushgateway (job "pipeline", grouped by channel).
    pushgateway_url: str = ""


class TracesConfig(_Section):
    # OpenTelemetry spans per run, model call and tool execution (GenAI semantic conventions); needs the otel extra.
    enabled: bool = False
    # otlp: OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (needs opentelemetry-exporter-otlp-proto-http);
    # console: spans on stderr; none: the tracer provider already installed (e.g. by opentelemetry-instrument).
    exporter: Literal["otlp", "console", "none"] = "otlp"
    service_name: str = "pipeline"


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
    report: ReportConfig = Field(default_factory=ReportConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    channels: list[ChannelConfig] = Field(default_factory=list)

    # Where the file was read from; relative paths resolve against its directory.
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)
    _channel: ChannelConfig | None = PrivateAttr(default=None)

    @field_validator("channels")
    @classmethod
    def _unique_channel_names(cls, value: list[ChannelConfig]) -> list[ChannelConfig]:
        names = [c.name for c in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate channel names {dupes}")
        return value

    @property
    def channel(self) -> ChannelConfig:
        """This config's channel: the one it was made for, or the implicit default."""
        if self._channel is not None:
            return self._channel
        return ChannelConfig(name="default", cron=self.daemon.cron, timezone=self.daemon.timezone)

    def channel_names(self) -> list[str]:
        return [c.name for c in self.channels] or ["default"]

    def for_channel(self, name: str | None) -> Config:
        """The effective config of one channel: its tables merged over the top-level ones."""
        if not self.channels:
            if name not in (None, "default"):
                raise ConfigError(f"no channel {name!r}: this config declares no [[channels]]")
            return self
        if name is None:
            if len(self.channels) > 1:
                raise ConfigError(f"this config has several channels; pass --channel (one of {self.channel_names()})")
            name = self.channels[0].name
        chan = next((c for c in self.channels if c.name == name), None)
        if chan is None:
            raise ConfigError(f"no channel {name!r}; channels: {self.channel_names()}")
        data = {k: v for k, v in self._raw.items() if k != "channels"}
        for section, attr in (("agent", "agent"), ("topic", "topic"), ("draft", "draft"), ("humanize", "humanize"),
                              ("publish", "publish"), ("register", "registration")):
            _merge(data.setdefault(section, {}), getattr(chan, attr))
        try:
            cfg = Config.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, f"channel {name}")) from None
        cfg.base_dir, cfg._raw, cfg._channel = self.base_dir, self._raw, chan
        return cfg

    @property
    def state_dir(self) -> Path:
        return self.path(self.daemon.state_dir)

    @field_validator("claims")
    @classmethod
    def _claims_name_capabilities(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(set(value) - set(capability_names()))
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}")
        return value

    def path(self, value: str | os.PathLike[str]) -> Path:
        """Resolve a configured path against the config file's directory."""
        return resolve(self.base_dir, value)

    def run_settings(self) -> RunSettings:
        """What this config's run steps read (``RunContext.settings``): the same section objects, not copies."""
        return RunSettings(self.topic, self.draft, self.humanize, self.publish, self.registration, self.report,
                           self.base_dir, self.ledger_url, self.state_dir)

    def secrets(self, environ: dict[str, str] | None = None) -> Secrets:
        """The secret values this config points at, its channels' overrides included (``pipeline.text.redact``)."""
        env = os.environ if environ is None else environ

        def var(name: str) -> str:
            return env.get(name, "") if name else ""

        pub = self.publish
        ghost = var(pub.ghost.admin_key_env)
        values = [var(self.llm.api_key_env), var(pub.wordpress.password_env), ghost,
                  ghost.split(":", 1)[-1] if ":" in ghost else "", var(pub.webhook.secret_env)]
        urls = [self.alerts.webhook_url, var(self.alerts.webhook_url_env), self.alerts.ping_url,
                self.report.webhook_url, var(self.report.webhook_url_env)]
        # The Celery broker URL may carry a password; the webhook target and the API base are shown in messages.
        shown = [pub.webhook.url, self.llm.api_base or "", self.engine.broker_url, var(self.engine.broker_url_env)]
        found = Secrets(tuple(v for v in values if v), tuple(u for u in urls if u), tuple(u for u in shown if u))
        for chan in self.channels:
            if chan.publish and self._channel is None:
                try:
                    found = found.plus(self.for_channel(chan.name).secrets(environ))
                except Exception:  # a bad channel table is reported by config validation, not here
                    pass
        return found

    @property
    def ledger_url(self) -> str:
        """The ledger URL with a relative SQLite path made absolute."""
        url = self.ledger.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/") and ":memory:" not in url:
            return prefix + str(self.path(url[len(prefix):]))
        return url


@dataclass(frozen=True)
class RunSettings:
    """What a run's steps (the capabilities, publish's settling and review) read of the config.

    The sections they use, where relative paths resolve, and where the channel's lock lives. The rest of
    the config (the model, the schedule, the engine, alerts) stays with the runner that made this.
    """

    topic: TopicConfig
    draft: DraftConfig
    humanize: HumanizeConfig
    publish: PublishConfig
    registration: RegisterConfig
    report: ReportConfig
    base_dir: Path
    ledger_url: str
    state_dir: Path

    def path(self, value: str | os.PathLike[str]) -> Path:
        """Resolve a configured path against the config file's directory."""
        return resolve(self.base_dir, value)


@dataclass(frozen=True)
class Secrets:
    """The values a config points at that are never stored, printed, alerted or logged."""

    # Keys, passwords and HMAC secrets, as they are.
    values: tuple[str, ...] = ()
    # Chat webhook and ping URLs: secret whole, and so are their token-like parts.
    urls: tuple[str, ...] = ()
    # URLs shown in messages (the webhook target, the API base, the broker): only their token-like parts are secret.
    shown_urls: tuple[str, ...] = ()

    def plus(self, other: Secrets) -> Secrets:
        return Secrets(self.values + other.values, self.urls + other.urls, self.shown_urls + other.shown_urls)


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


def _merge(into: dict[str, Any], overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _env_overrides(data: dict[str, Any], environ: dict[str, str]) -> dict[tuple[str, ...], str]:
    """Apply the environment's overrides; returns which variable set each key (to name it in an error)."""
    origin: dict[tuple[str, ...], str] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith("PIPELINE_") or "__" not in name or name == "PIPELINE_CONFIG":
            continue
        section, _, key = name[len("PIPELINE_"):].partition("__")
        # Section names hold no underscores, so PIPELINE_PUBLISH_LOCAL__DIR is publish.local.dir.
        dotted = [*section.lower().split("_"), key.lower()]
        _set(data, dotted, _literal(raw))
        origin[tuple(dotted)] = f"{name}={raw}"
    for name, dotted_ in _SWITCHES.items():
        if name in environ:
            raw = environ[name].strip().lower()
            _set(data, list(dotted_), {"1": True, "0": False}.get(raw) if raw in ("1", "0") and
                 dotted_[-1] == "hallucination_guard" else _literal(raw))
            origin[dotted_] = f"{name}={environ[name]}"
    return origin


def _section_model(loc: list[str]) -> Any:
    """The pydantic model that holds the key at ``loc`` (for "did you mean"), or None."""
    model: Any = Config
    for part in loc[:-1]:
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return None
        model = field.annotation
    return model


def _did_you_mean(word: str, choices: list[str]) -> str:
    import difflib

    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""


def _describe(err: ValidationError, source: str, origin: dict[tuple[str, ...], str] | None = None) -> str:
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    where = f"[{'.'.join(loc[:-1])}] {loc[-1]}" if len(loc) > 1 else (loc[0] if loc else "?")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        model = _section_model(loc)
        names = [f.alias or n for n, f in model.model_fields.items()] if model is not None else []
        msg = "unknown key" + _did_you_mean(loc[-1], names)
    # A value from the environment is reported as the variable that set it: the file has no such key.
    for n in range(len(loc), 0, -1):
        if origin and tuple(loc[:n]) in origin:
            return f"environment {origin[tuple(loc[:n])]}: {where}: {msg}"
    # An unknown section that only the environment named (PIPELINE_AGNT__MAX_TURNS): the variable, not the file.
    named = [v for k, v in (origin or {}).items() if k[:len(loc)] == tuple(loc)]
    if named:
        return f"environment {named[0]}: {where}: {msg}"
    return f"{source}: {where}: {msg}"


def resolve_path(explicit: str | os.PathLike[str] | None, environ: dict[str, str] | None = None) -> Path:
    environ = dict(os.environ if environ is None else environ)
    if explicit:
        return Path(explicit)
    if environ.get("PIPELINE_CONFIG"):
        return Path(environ["PIPELINE_CONFIG"])
    return Path("config.toml")


def not_found(explicit: str | os.PathLike[str] | None, environ: dict[str, str] | None = None) -> str:
    """The one line a command that needs a config prints when there is none: where it looked."""
    environ = dict(os.environ if environ is None else environ)
    path = resolve_path(explicit, environ)
    if explicit:
        return f"{path}: no such config file (--config)"
    if environ.get("PIPELINE_CONFIG"):
        return f"{path}: no such config file ($PIPELINE_CONFIG)"
    return (f"no config file: looked for config.toml in {Path.cwd()} (no --config given, $PIPELINE_CONFIG unset); "
            "`pipeline init` writes a starter one")


def require(explicit: str | os.PathLike[str] | None = None, environ: dict[str, str] | None = None) -> Config:
    """``load``, but a missing file is an error: the commands that act (run, daemon, worker, serve) never
    fall back to built-in defaults (a hosted model, a second ledger in whatever directory they started in)."""
    if not resolve_path(explicit, environ).exists():
        raise ConfigError(not_found(explicit, environ))
    return load(explicit, environ)


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
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    elif explicit or environ.get("PIPELINE_CONFIG"):
        raise ConfigError(f"{path}: no such config file")
    origin = _env_overrides(data, environ)
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, str(path), origin)) from None
    cfg.base_dir = path.resolve().parent
    cfg._raw = data
    for chan in cfg.channels:  # surface a bad channel table now, not at 3 a.m.
        cfg.for_channel(chan.name)
    return cfg
