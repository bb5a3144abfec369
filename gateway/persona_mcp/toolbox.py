"""A turn's tools: the host tools plus the persona's MCP server tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.runtime.agent import ToolBox, ToolOutcome
from gateway.runtime.model import ToolCall, ToolSpec

if TYPE_CHECKING:
    from gateway.persona_mcp.manager import PersonaMcpManager
    from gateway.personas import Persona

__all__ = ["ComposedToolBox"]


class ComposedToolBox:
    """A :class:`gateway.runtime.agent.ToolBox` that routes ``<server>__<tool>`` calls to the
    persona's MCP servers and every other call to the host tools.

    Args:
        host_box (:class:`gateway.runtime.agent.ToolBox`): The turn's host tools.
        manager (:class:`gateway.persona_mcp.PersonaMcpManager`): The daemon's MCP servers.
        persona (:class:`gateway.personas.Persona`): The turn's persona.
        specs (Sequence[:class:`gateway.runtime.model.ToolSpec`]): The persona's MCP tools for
            this turn (from :meth:`PersonaMcpManager.specs`).
    """

    def __init__(
        self, host_box: ToolBox, manager: PersonaMcpManager, persona: Persona, specs: Sequence[ToolSpec]
    ):
        self.host_box = host_box
        self.manager = manager
        self.persona = persona
        host = tuple(host_box.specs())
        taken = {s.name for s in host}
        self._specs = host + tuple(s for s in specs if s.name not in taken)

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    async def call(self, call: ToolCall) -> ToolOutcome:
        if self.manager.owns(self.persona, call.name):
            return await self.manager.call(self.persona, call.name, call.arguments)
        return await self.host_box.call(call)

    def close(self) -> None:
        """Close the host toolbox (its identity stops working); the servers stay up."""
        close = getattr(self.host_box, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ComposedToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> object:
        # The host toolbox's extras (e.g. RunToolBox.environment) stay reachable.
        if name == "host_box":
            raise AttributeError(name)
        return getattr(self.host_box, name)
