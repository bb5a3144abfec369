"""The one table of host tools: MCP name <-> internal name <-> capability prefix.

Each tool module defines ``TOOL`` (a :class:`tools.base.HostTool`); this module collects them
in a fixed order and is the only place that lists them. The table is checked when it is
built: names must be unique and every prefix must be a known capability label.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.labels import KNOWN_LABELS, may_list
from tools import (
    background_agent,
    channel_send,
    db_query,
    memory_access,
    net_http,
    persona_list,
    persona_send,
    persona_task_status,
    schedule_manage,
    subagent_invoke,
)
from tools.base import HostTool

__all__ = ["all_tools", "by_internal_name", "by_mcp_name", "tools_for"]


def _build(tools: Iterable[HostTool]) -> tuple[HostTool, ...]:
    table = tuple(tools)
    for attr in ("mcp_name", "internal_name"):
        names = [getattr(t, attr) for t in table]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise RuntimeError(f"host tools share the {attr} {', '.join(duplicates)}")
    for tool in table:
        if tool.prefix not in KNOWN_LABELS:
            raise RuntimeError(f"host tool {tool.mcp_name} has the unknown capability prefix {tool.prefix!r}")
    return table


_TOOLS: tuple[HostTool, ...] = _build(
    module.TOOL
    for module in (
        channel_send,
        memory_access,
        db_query,
        net_http,
        schedule_manage,
        subagent_invoke,
        persona_send,
        persona_task_status,
        persona_list,
        background_agent,
    )
)
_BY_MCP = {t.mcp_name: t for t in _TOOLS}
_BY_INTERNAL = {t.internal_name: t for t in _TOOLS}


def all_tools() -> list[HostTool]:
    """Every host tool, in registry order."""
    return list(_TOOLS)


def by_mcp_name(name: str) -> HostTool | None:
    """The tool called ``name`` at the MCP layer (``memory_access``), or ``None``."""
    return _BY_MCP.get(name)


def by_internal_name(name: str) -> HostTool | None:
    """The tool called ``name`` inside the daemon (``memory.access``), or ``None``."""
    return _BY_INTERNAL.get(name)


def tools_for(labels: Iterable[str]) -> list[HostTool]:
    """The tools a persona holding ``labels`` may see, in registry order."""
    held = list(labels)
    return [t for t in _TOOLS if may_list(held, t)]
