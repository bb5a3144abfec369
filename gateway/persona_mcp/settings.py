"""``mcp_servers:`` entries of persona.yaml -> typed server settings.

An entry is either a stdio server (``command``) or a streamable HTTP server (``url``)::

    mcp_servers:
      files:
        command: /opt/mcp/bin/files-server
        args: [--root, .]
        env: {API_TOKEN: "${FILES_TOKEN}"}
        sandbox: bwrap          # or none (runs unconfined)
        network: false          # true lets a sandboxed server use the network
        timeout: 60             # seconds per tool call
      search:
        url: https://mcp.example.com/mcp
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}

Every problem names ``personas/<name>/persona.yaml: mcp_servers.<server>.<key>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "NAMESPACE_SEPARATOR",
    "RESERVED_PREFIX",
    "HttpServerSettings",
    "McpServerSettings",
    "StdioServerSettings",
    "mcp_server_problems",
    "namespaced",
    "parse_mcp_servers",
    "tool_name_problem",
]

RESERVED_PREFIX = "__talond_"
NAMESPACE_SEPARATOR = "__"
# Model providers accept tool names of 1-64 characters from this set.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TYPES = {"stdio": "stdio", "http": "http", "streamable_http": "http", "streamable-http": "http"}


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: str | None = Field(
        None, description="stdio or http (also streamable_http, streamable-http); null = from command or url"
    )
    timeout: float = Field(60.0, gt=0, le=3600, description="seconds per tool call")


class StdioServerSettings(_Entry):
    """A server run as a child process, spoken to over stdin/stdout."""

    command: str = Field(min_length=1, description="the program to run, a path or a name on PATH")
    args: list[str] = Field([], description="its arguments")
    env: dict[str, str] = Field(
        {}, description="its environment, besides PATH, HOME and LANG; values may use ${VAR}"
    )
    cwd: str | None = Field(None, description="working directory; relative paths are inside the workspace")
    sandbox: Literal["bwrap", "none"] = Field(
        "bwrap", description="bwrap confines it with bubblewrap; none runs it as is"
    )
    network: bool = Field(False, description="let a sandboxed server use the network")
    read_only_paths: list[str] = Field([], description="extra host paths visible read-only in the sandbox")

    @field_validator("args", mode="before")
    @classmethod
    def _args_as_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [v if isinstance(v, str) else str(v) for v in value]
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, val in value.items():
                if not isinstance(key, str) or not _ENV_NAME.match(key):
                    raise ValueError(f"{key!r} is not a valid environment variable name")
                out[key] = "" if val is None else (str(val).lower() if isinstance(val, bool) else str(val))
            return out
        return value

    @field_validator("read_only_paths")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/"):
                raise ValueError(f"{path!r} must be an absolute path")
        return value


class HttpServerSettings(_Entry):
    """A server reached over streamable HTTP."""

    url: str = Field(pattern=r"^https?://\S+$", description="the server's streamable HTTP endpoint")
    headers: dict[str, str] = Field(
        {}, description="sent with every request, e.g. Authorization; values may use ${VAR}"
    )

    @field_validator("headers", mode="before")
    @classmethod
    def _headers_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): "" if v is None else str(v) for k, v in value.items()}
        return value


McpServerSettings = StdioServerSettings | HttpServerSettings


def namespaced(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``<server>__<tool>``."""
    return f"{server}{NAMESPACE_SEPARATOR}{tool}"


def tool_name_problem(server: str, tool: str) -> str | None:
    """Why ``<server>__<tool>`` cannot be offered to a model, or None when it can."""
    name = namespaced(server, tool)
    if not _TOOL_NAME.match(name):
        return f"{name!r} must be 1-64 letters, digits, '_' or '-'"
    return None


def _server_name_problem(name: str) -> str | None:
    if name.startswith(RESERVED_PREFIX):
        return f"names starting with {RESERVED_PREFIX} are reserved for Talon's own servers; rename it"
    if not _SERVER_NAME.match(name):
        return "must be 1-32 letters, digits, '_' or '-', starting with a letter or digit; rename it"
    if NAMESPACE_SEPARATOR in name:
        return f"must not contain {NAMESPACE_SEPARATOR!r} (it separates server and tool names); rename it"
    return None


def parse_mcp_servers(persona: str, raw: Mapping[str, Any]) -> tuple[dict[str, McpServerSettings], list[str]]:
    """Validate a persona's ``mcp_servers`` mapping.

    Args:
        persona (:obj:`str`): The persona's name, for the messages.
        raw (Mapping[:obj:`str`, Any]): ``mcp_servers`` as read from persona.yaml, ``${VAR}``
            already substituted.

    Returns:
        tuple[dict[:obj:`str`, :obj:`McpServerSettings`], list[:obj:`str`]]: The valid entries by
        server name, and one message per problem (an entry with a problem is left out).
    """
    where = f"personas/{persona}/persona.yaml: mcp_servers"
    servers: dict[str, McpServerSettings] = {}
    problems: list[str] = []
    for name, entry in raw.items():
        name = str(name)
        why = _server_name_problem(name)
        if why:
            problems.append(f"{where}.{name}: {why}")
            continue
        if not isinstance(entry, Mapping):
            problems.append(
                f"{where}.{name}: must be a mapping with command (stdio) or url (streamable HTTP)"
            )
            continue
        kind = _kind(entry)
        if kind is None:
            problems.append(
                f"{where}.{name}: needs exactly one of command (a stdio server) or url (a streamable HTTP server)"
            )
            continue
        if "type" in entry and _TYPES.get(str(entry["type"])) != kind:
            problems.append(
                f"{where}.{name}.type: {entry['type']!r} does not match the entry; use stdio with command "
                "or http with url (or leave type out)"
            )
            continue
        model = StdioServerSettings if kind == "stdio" else HttpServerSettings
        try:
            servers[name] = model.model_validate(dict(entry))
        except ValidationError as exc:
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"])
                if err["type"] == "extra_forbidden":
                    fix = f"unknown key for a {kind} server; remove it or check its spelling"
                elif err["type"] == "missing":
                    fix = "required; add it"
                else:
                    fix = err["msg"].removeprefix("Value error, ")
                problems.append(f"{where}.{name}.{key}: {fix}")
    return servers, problems


def mcp_server_problems(persona: str, raw: Mapping[str, Any]) -> list[str]:
    """Only the problems of :func:`parse_mcp_servers`, for the persona loader."""
    return parse_mcp_servers(persona, raw)[1]


def _kind(entry: Mapping[str, Any]) -> Literal["stdio", "http"] | None:
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        return None
    return "stdio" if has_command else "http"
