"""Persona MCP servers for the running daemon: one shared connection per persona and server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.config import Settings
from gateway.persona_mcp.connection import McpServerConnection
from gateway.persona_mcp.sandbox import DEFAULT_BWRAP, sandbox_problem
from gateway.persona_mcp.settings import (
    NAMESPACE_SEPARATOR,
    StdioServerSettings,
    namespaced,
    parse_mcp_servers,
    tool_name_problem,
)
from gateway.runtime.agent import ToolOutcome
from gateway.runtime.model import ToolSpec
from gateway.workspaces import shared_workspace

if TYPE_CHECKING:
    from gateway.personas import Persona

__all__ = ["PersonaMcpManager", "workspace_path"]

log = logging.getLogger("talon.persona_mcp")


def workspace_path(settings: Settings, persona: Persona) -> Path:
    """The persona's shared workspace (``/shared`` of the file tools): all its servers see.

    A server is one per persona, not per thread, so it never sees ``threads/``: that would
    hand every thread's files to whatever the server does for any one of them.
    """
    return shared_workspace(settings, persona)


class PersonaMcpManager:
    """The MCP servers every persona declares in ``mcp_servers``.

    Servers start in the background (:meth:`start`) and stay up; a persona's turns share them.
    Their tools are offered as ``<server>__<tool>``.

    Args:
        settings (:class:`gateway.config.Settings`): The daemon's settings (for the data dir).
        personas (Mapping[:obj:`str`, :class:`gateway.personas.Persona`]): Loaded personas.
        bwrap (:obj:`str`, optional): The bubblewrap binary, a name on PATH or a path.
        start_timeout (:obj:`float`, optional): Seconds one server start may take.
        backoff (:obj:`float`, optional): Seconds before restarting a failed server; doubles
            with each further failure up to ``max_backoff``.
        max_backoff (:obj:`float`, optional): The longest wait between restarts.
        spec_wait (:obj:`float`, optional): How long :meth:`specs` waits for servers still
            starting before listing the tools that are ready.

    Attributes:
        problems (list[:obj:`str`]): Invalid ``mcp_servers`` entries (left out), one message each.
    """

    def __init__(
        self,
        settings: Settings,
        personas: Mapping[str, Persona],
        *,
        bwrap: str = DEFAULT_BWRAP,
        start_timeout: float = 30.0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        spec_wait: float = 10.0,
    ):
        self.settings = settings
        self.spec_wait = spec_wait
        self.problems: list[str] = []
        self._servers: dict[str, dict[str, McpServerConnection]] = {}
        self._skipped: set[str] = set()
        preflight = partial(sandbox_problem, bwrap)
        for persona in personas.values():
            parsed, problems = parse_mcp_servers(persona.name, persona.mcp_servers)
            self.problems += problems
            self._servers[persona.name] = {
                name: McpServerConnection(
                    persona.name,
                    name,
                    entry,
                    workspace=workspace_path(settings, persona),
                    workspace_writable=not persona.shared_read_only,
                    log_path=settings.data_path / "logs" / "mcp" / f"{persona.name}.{name}.log",
                    bwrap=bwrap,
                    start_timeout=start_timeout,
                    backoff=backoff,
                    max_backoff=max_backoff,
                    preflight=preflight,
                )
                for name, entry in parsed.items()
            }

    def connections(self) -> list[McpServerConnection]:
        """Every configured server, for status reports."""
        return [c for servers in self._servers.values() for c in servers.values()]

    async def start(self) -> None:
        """Report configuration problems and start every server in the background.

        Returns at once; call it after the daemon is ready so that start-up stays fast.
        """
        for problem in self.problems:
            log.error("%s (this server is not started)", problem)
        for conn in self.connections():
            if isinstance(conn.settings, StdioServerSettings) and conn.settings.sandbox == "none":
                log.warning(
                    "MCP server %s runs without a sandbox (sandbox: none): it can read and write "
                    "whatever the daemon's user can",
                    conn.label,
                )
            conn.start_soon()

    async def stop(self) -> None:
        """Stop every server; their processes are ended."""
        await asyncio.gather(*(c.stop() for c in self.connections()), return_exceptions=True)

    def cached_specs(self, persona: Persona) -> list[ToolSpec]:
        """The persona's MCP tools from the servers that have listed them so far."""
        specs: list[ToolSpec] = []
        for name, conn in self._servers.get(persona.name, {}).items():
            for tool in conn.tools or ():
                why = tool_name_problem(name, tool.name)
                if why:
                    self._skip_once(conn, tool.name, why)
                    continue
                description = tool.description or tool.title or f"{tool.name} from the {name} MCP server"
                specs.append(ToolSpec(namespaced(name, tool.name), description, dict(tool.input_schema)))
        return specs

    async def specs(self, persona: Persona, wait: float | None = None) -> list[ToolSpec]:
        """The persona's MCP tools, waiting up to ``wait`` seconds for servers still starting.

        A server that is down (and past its backoff) is started again in the background; its
        tools are left out until it is up.
        """
        starts = [t for c in self._servers.get(persona.name, {}).values() if (t := c.start_soon())]
        if starts:
            await asyncio.wait(starts, timeout=self.spec_wait if wait is None else wait)
        return self.cached_specs(persona)

    def owns(self, persona: Persona, name: str) -> bool:
        """Whether ``name`` is a ``<server>__<tool>`` name of one of the persona's servers."""
        server, sep, tool = name.partition(NAMESPACE_SEPARATOR)
        return bool(sep and tool) and server in self._servers.get(persona.name, {})

    async def call(self, persona: Persona, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run the persona's ``<server>__<tool>``; failures come back as error outcomes."""
        server, _, tool = name.partition(NAMESPACE_SEPARATOR)
        conn = self._servers.get(persona.name, {}).get(server)
        if conn is None or not tool:
            return ToolOutcome(f"unknown tool {name!r}", is_error=True)
        return await conn.call(tool, arguments)

    def _skip_once(self, conn: McpServerConnection, tool: str, why: str) -> None:
        key = f"{conn.label}/{tool}"
        if key not in self._skipped:
            self._skipped.add(key)
            log.warning("MCP server %s: tool %s is not offered: %s", conn.label, tool, why)
