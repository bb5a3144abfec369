"""talon.yaml -> typed settings.

``${VAR}`` is substituted from the environment and from ``.env`` beside the file (the
environment wins; :mod:`gateway.config_env`), the settings are validated, and the checks
across keys run (:mod:`gateway.config_checks`). Every error names the key path and the fix,
and all errors are reported together in one :class:`ConfigError`.
"""

from __future__ import annotations

import os
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from gateway.backoff import Backoff
from gateway.browser_settings import BrowserSettings
from gateway.channel_settings import (
    DEFAULT_MAX_INBOUND_CHARS,
    SECRET_HINTS,
    ChannelBase,
    ChannelRetrySettings,
    ChannelSettings,
    ConsoleChannel,
    DiscordChannel,
    PacingSettings,
    RateLimitSettings,
    RolesSettings,
    SessionScope,
    SlackChannel,
    TelegramChannel,
    TypingInterval,
    WebChannel,
    WebSite,
)
from gateway.config_checks import cross_check
from gateway.config_env import env_origins, join_key, load_env, substitute_env
from gateway.config_errors import NAME_PATTERN, describe_validation, read_yaml
from gateway.console_settings import ConsoleSettings
from gateway.database_settings import DatabaseSettings
from gateway.errors import ConfigError
from gateway.http.settings import HttpSettings
from gateway.image_settings import ImageSettings
from gateway.model_types import StrictModel
from gateway.streaming_settings import StreamingMode
from gateway.traces_settings import TracesSettings
from gateway.usage_settings import OperatorSettings, Price, SpendBudgets
from gateway.voice_settings import SpeechSettings, TranscriptionSettings
from gateway.web_settings import WebSearchSettings

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_MAX_INBOUND_CHARS",
    "SECRET_HINTS",
    "AgentSettings",
    "Binding",
    "ChannelBase",
    "ChannelRetrySettings",
    "ChannelSettings",
    "ConfigError",
    "ConsoleChannel",
    "DelegationSettings",
    "DiscordChannel",
    "LogFileSettings",
    "NetHttpSettings",
    "OutboxSettings",
    "PacingSettings",
    "ProviderSettings",
    "QueueSettings",
    "RateLimitSettings",
    "RolesSettings",
    "SchedulerSettings",
    "Settings",
    "SlackChannel",
    "SubagentSettings",
    "TelegramChannel",
    "TypingInterval",
    "WebChannel",
    "WebSite",
    "embedded_defaults_in_use",
    "load_settings",
    "resolve_config_path",
]

DEFAULT_CONFIG = "talon.yaml"
_NAME = NAME_PATTERN


_Strict = StrictModel


# ---------------------------------------------------------------- providers


class ProviderSettings(_Strict):
    type: Literal["anthropic", "openai"] = Field(
        description="anthropic (Messages API) or openai (any OpenAI-compatible Chat Completions server)"
    )
    api_key: str | None = Field(
        None,
        description="API key; anthropic needs one, openai sends 'none' without one (local servers ignore it)",
    )
    base_url: str | None = Field(
        None, description="API root; null = the provider's own (api.anthropic.com, api.openai.com)"
    )
    timeout: float = Field(120.0, gt=0, description="seconds per model call")
    max_retries: int = Field(3, ge=0, le=10, description="retries on 429/5xx/overloaded")
    images: bool = Field(
        True,
        description="whether this provider's models take images: photos users send and view_image results "
        "go to the model as image content; false sends notes with their paths, type and size instead",
    )
    text_only_models: list[str] = Field(
        [],
        description="models of this provider that take no images (a local text model, say): they get "
        "text notes for photos and view_image, as images: false does for all",
    )

    def accepts_images(self, model: str) -> bool:
        """Whether requests for ``model`` may carry image content."""
        return self.images and model not in self.text_only_models

    @field_validator("api_key", "base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value


# ---------------------------------------------------------------- the rest


class Binding(_Strict):
    channel: str = Field(description="a channel name from channels")
    persona: str = Field(pattern=_NAME, description="the persona folder (in personas_dir) that answers")
    chat: str | None = Field(
        None, description="one chat id of that channel, which then wins over its default; null = the default"
    )
    streaming: StreamingMode | None = Field(
        None, description="this binding's streaming (off, edit, native); null = the channel's"
    )

    session_scope: SessionScope | None = Field(
        None, description="overrides the channel's session_scope for this chat; null = the channel's"
    )

    @field_validator("chat", mode="before")
    @classmethod
    def _chat_as_string(cls, value: Any) -> Any:
        return None if value is None else str(value)


class QueueSettings(_Strict):
    workers: int = Field(
        32,
        ge=1,
        le=256,
        description="conversations whose turns run at once (a turn mostly waits on the model)",
    )
    max_attempts: int = Field(5, ge=1, le=100, description="tries per turn, then it is dead-lettered")
    lease_seconds: float = Field(
        300.0,
        gt=0,
        description="lease expiry stored on running items; a stopped daemon's are released at start",
    )
    backoff_base: float = Field(2.0, gt=0, description="first retry delay, seconds")
    backoff_max: float = Field(300.0, gt=0, description="longest retry delay, seconds")

    @cached_property
    def backoff(self) -> Backoff:
        """Delays between the tries of a failed turn."""
        return Backoff(base=self.backoff_base, max=self.backoff_max)


class AgentSettings(_Strict):
    max_turns: int = Field(12, ge=1, le=100, description="model calls per turn")
    turn_timeout: float = Field(600.0, gt=0, description="seconds per turn")
    context_tokens: int = Field(32_000, ge=1000, description="transcript budget per turn")
    max_tokens: int = Field(4096, ge=16, description="max output tokens per model call")


class OutboxSettings(_Strict):
    max_attempts: int = Field(8, ge=1, le=100, description="delivery attempts per chunk on transient errors")
    backoff_base: float = Field(1.0, gt=0, description="first retry delay, seconds")
    backoff_max: float = Field(300.0, gt=0, description="longest retry delay, seconds")

    @cached_property
    def backoff(self) -> Backoff:
        """Delays between the tries of a chunk the platform refused for now."""
        return Backoff(base=self.backoff_base, max=self.backoff_max)


class LogFileSettings(_Strict):
    path: Path | None = Field(
        Path("talon.log"),
        description="the daemon's log file, relative to data_dir (`talon logs`); null = none",
    )
    max_bytes: int = Field(10_000_000, ge=10_000, description="the file is rotated at this size")
    backups: int = Field(3, ge=0, description="rotated files kept (talon.log.1 ...)")


class SchedulerSettings(_Strict):
    grace_seconds: float = Field(600.0, ge=0, description="a run missed while stopped still fires this late")


class SubagentSettings(_Strict):
    models: dict[str, str | list[str]] = Field(
        {}, description="sub-agent name -> '<provider>:<model>' or a fallback list"
    )
    summarize: bool = Field(True, description="fold long threads into a summary memory item")
    summarize_share: float = Field(
        0.6, gt=0, lt=1, description="summarize above this share of agent.context_tokens"
    )


class DelegationSettings(_Strict):
    max_hops: int = Field(4, ge=1, le=16, description="persona_send chain length (A -> B -> C ...)")
    max_active_per_target: int = Field(4, ge=1, description="unfinished tasks one persona may have queued")
    await_timeout: float = Field(300.0, gt=0, le=1800, description="seconds persona_send await_reply waits")
    background_concurrency: int = Field(3, ge=1, description="background agent tasks running at once")
    background_timeout_minutes: float = Field(30.0, ge=15, description="default for timeoutMinutes")
    max_child_depth: int = Field(
        2, ge=1, le=8, description="nesting of child agents (agent, compose); a child at it cannot dispatch"
    )
    compose_parallel: int = Field(4, ge=1, le=20, description="compose nodes that run at once")


class NetHttpSettings(_Strict):
    allowed_domains: list[str] = Field([], description="global allowlist; empty = the label is the only gate")
    allowed_private_hosts: list[str] = Field(
        [], description="hosts/IPs allowed despite being private/loopback"
    )
    max_response_bytes: int = Field(1_000_000, ge=1, description="response bodies are cut at this size")


def _resolved(path: Path) -> Path:
    """``path`` made absolute with its links followed; an absolute path (the loaded config's)
    once per process: every turn asks for its workspace, and resolving makes a system call per
    part of the path."""
    return _resolved_once(path) if path.is_absolute() else path.resolve()


@lru_cache(maxsize=64)
def _resolved_once(path: Path) -> Path:
    return path.resolve()


class Settings(_Strict):
    data_dir: Path = Field(Path("data"), description="database, sockets and downloaded files (kept mode 700)")
    database: DatabaseSettings = Field(
        DatabaseSettings(),
        description="the store: the SQLite file in data_dir, or PostgreSQL (docs/scaling.md)",
    )
    personas_dir: Path = Field(Path("personas"), description="one folder per persona (docs/personas.md)")
    workspaces_dir: Path | None = Field(
        None,
        description="the threads' and personas' files; null = <data_dir>/workspaces. In a cluster, a "
        "shared folder every node mounts at this path (docs/scaling.md)",
    )
    timezone: str = Field("UTC", description="IANA name, for the current time in prompts and for schedules")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="`talon run --log-level` overrides it"
    )
    shutdown_grace: float = Field(20.0, ge=0, description="seconds running turns get on stop")
    log_file: LogFileSettings = Field(
        LogFileSettings(), description="the log file the daemon keeps in its data dir, size-bounded"
    )
    providers: dict[str, ProviderSettings] = Field(
        {}, description="model providers by name; personas say `<provider>:<model>`"
    )
    channels: list[ChannelSettings] = Field([], description="the console and the bot accounts to connect")
    channel_retry: ChannelRetrySettings = Field(
        ChannelRetrySettings(), description="channels that failed to start (network down, 5xx) are retried"
    )
    bindings: list[Binding] = Field([], description="which persona answers in which channel or chat")
    queue: QueueSettings = Field(QueueSettings(), description="inbound work: one turn at a time per thread")
    agent: AgentSettings = Field(AgentSettings(), description="limits of one turn")
    outbox: OutboxSettings = Field(
        OutboxSettings(), description="outbound delivery, one row per rendered chunk"
    )
    net_http: NetHttpSettings = Field(NetHttpSettings(), description="the net_http host tool")
    web_search: WebSearchSettings = Field(
        WebSearchSettings(), description="the search backend of web_scrape's search mode (docs/web.md)"
    )
    browser: BrowserSettings = Field(BrowserSettings(), description="the browser tools' headless Chromium")
    images: ImageSettings = Field(
        ImageSettings(),
        description="image_generate and image_edit's images endpoint and caps (docs/images.md)",
    )
    transcription: TranscriptionSettings = Field(
        TranscriptionSettings(), description="voice notes and audio files heard as text (docs/voice.md)"
    )
    speech: SpeechSettings = Field(
        SpeechSettings(), description="replies also sent as voice messages (docs/voice.md)"
    )
    scheduler: SchedulerSettings = Field(SchedulerSettings(), description="cron and one-shot schedules")
    delegation: DelegationSettings = Field(
        DelegationSettings(), description="persona_send and background agents"
    )
    subagents: SubagentSettings = Field(SubagentSettings(), description="sub-agents and thread summarization")
    traces: TracesSettings = Field(
        TracesSettings(), description="run traces (`talon runs`, self-inspection) and OpenTelemetry spans"
    )
    prices: dict[str, Price] = Field(
        {}, description="'<provider>:<model>' -> its price per million tokens; runs are priced when they end"
    )
    currency: str = Field(
        "USD", min_length=1, max_length=8, description="the currency of prices and cost budgets"
    )
    budgets: SpendBudgets = Field(
        SpendBudgets(), description="spending budgets per user, persona and channel (tokens or cost)"
    )
    operator: OperatorSettings = Field(OperatorSettings(), description="where the operator is told things")
    http: HttpSettings | None = Field(
        None, description="the HTTP server (docs/http.md); null or absent = off"
    )
    console: ConsoleSettings | None = Field(
        None,
        description="the web console's users and sessions (docs/console.md); served at /console/ by the "
        "HTTP server; null or absent = no console",
    )
    # Where this file lives; relative paths above are resolved against it.
    config_dir: Path = Field(Path("."), exclude=True)
    # Key path -> the ${VAR} put into it (set or not), for config_get's masking and env view.
    env_refs: dict[str, str] = Field({}, exclude=True)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {value!r}; use an IANA name such as UTC or Europe/Berlin"
            ) from None
        return value

    def channel(self, name: str) -> ChannelSettings | None:
        return next((c for c in self.channels if c.name == name), None)

    @property
    def data_path(self) -> Path:
        return _resolved(self.config_dir / self.data_dir)

    @property
    def workspaces_path(self) -> Path:
        if self.workspaces_dir is None:
            return self.data_path / "workspaces"
        return _resolved(self.config_dir / self.workspaces_dir)

    @property
    def personas_path(self) -> Path:
        return _resolved(self.config_dir / self.personas_dir)

    def secrets(self) -> list[str]:
        """Every secret value in the config, for log redaction."""
        values: list[str | None] = [p.api_key for p in self.providers.values()]
        for ch in self.channels:
            for key in ("token", "bot_token", "app_token", "signing_secret", "webhook_secret"):
                values.append(getattr(ch, key, None))
            values.extend(site.token for site in getattr(ch, "sites", ()))
        if self.http is not None:
            values.append(self.http.metrics_token)
            values += [route.secret for route in self.http.webhooks]
        values.extend(self.traces.headers.values())
        values.append(self.database.password)
        return [v for v in values if v and len(v) >= 6 and v != "none"]


# ---------------------------------------------------------------- loading


def resolve_config_path(path: str | os.PathLike[str] | None) -> Path:
    return Path(path or os.environ.get("TALON_CONFIG") or DEFAULT_CONFIG)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Read, substitute and validate talon.yaml; raise ConfigError listing every problem."""
    file = resolve_config_path(path)
    if not file.is_file():
        if path is None and not os.environ.get("TALON_CONFIG"):
            return _embedded_defaults()
        raise ConfigError([f"{file}: no such config file; create one with `talon init DIR` or pass -c PATH"])
    return _validate(read_yaml(file) or {}, file.parent, str(file))


def embedded_defaults_in_use(path: str | os.PathLike[str] | None) -> bool:
    """True when no talon.yaml applies and the built-in defaults are used."""
    return path is None and not os.environ.get("TALON_CONFIG") and not Path(DEFAULT_CONFIG).is_file()


def _embedded_defaults() -> Settings:
    """The `talon init` config, run from the current directory: a console channel bound to
    the packaged `assistant` persona, data in ./data, `.env` read from here."""
    template = resources.files("gateway") / "templates" / "init"
    raw = read_yaml(Path(str(template / "talon.yaml")))
    raw["personas_dir"] = str(Path(str(template / "personas")))
    return _validate(raw, Path.cwd(), "the built-in talon.yaml")


def _validate(raw: Any, config_dir: Path, shown: str) -> Settings:
    if not isinstance(raw, dict):
        raise ConfigError([f"{shown}: the top level must be a mapping of keys such as data_dir, channels"])
    missing: dict[str, str] = {}
    used: dict[str, str] = {}
    raw = substitute_env(raw, load_env(config_dir), missing, used)
    raw["config_dir"] = config_dir.resolve()
    raw["env_refs"] = {**missing, **used}
    problems: list[str] = []
    settings: Settings | None = None
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        problems = _describe(exc, raw, missing, env_origins(used, config_dir))
    reported = {p.split(":", 1)[0] for p in problems}
    problems += [p for p in cross_check(raw) if p.split(":", 1)[0] not in reported]
    if problems or settings is None:
        raise ConfigError(problems)
    return settings


def _loc(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    out = ""
    node: Any = raw
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and part < len(node) else None
        elif isinstance(node, dict) and part in node:
            out = join_key(out, str(part))
            node = node[part]
        elif isinstance(node, dict) and "type" in node and part == node.get("type"):
            continue  # discriminated-union tag, not a key the user wrote
        else:
            out = join_key(out, str(part))
            node = None
    return out or "(top level)"


def _describe(
    exc: ValidationError, raw: dict[str, Any], missing: dict[str, str], origins: dict[str, str]
) -> list[str]:
    def where(loc: tuple[Any, ...]) -> str:
        return _loc(loc, raw)

    problems = []
    described = describe_validation(exc, Settings, where=where, origins=origins)
    for err, text in zip(exc.errors(), described, strict=True):
        path = where(tuple(err["loc"]))
        if path in missing:  # the value is wrong because its variable is unset
            text = f"{path}: ${{{missing[path]}}} is not set; set {missing[path]} in .env or the environment"
        problems.append(text)
    return list(dict.fromkeys(problems))
