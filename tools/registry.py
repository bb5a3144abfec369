"""The one table of tools: MCP name <-> internal name <-> capability prefix.

Tools come in families, each a package of ``tools`` with a ``TOOLS`` sequence of
:class:`tools.base.HostTool` and an ``instructions/`` folder of ``<capability.prefix>.md``
files (the packaged defaults of :mod:`tools.instruction_files`). Adding a family is one import
and one entry in ``_FAMILIES``; the table lists the families' tools in that order.

The table is checked when it is built: names must be unique, every prefix must be a known
capability label, and each instruction file must belong to a prefix of its own family's tools
and be shipped by one family only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from types import ModuleType

from gateway.labels import KNOWN_LABELS, may_list, tool_prefixes
from tools import (
    agents,
    ask,
    browser,
    findings,
    host,
    images,
    inspect,
    memory,
    model_call,
    schedules,
    skills,
    state,
    web,
    workspace,
)
from tools.base import HostTool

__all__ = ["all_tools", "by_internal_name", "by_mcp_name", "packaged_instructions", "tools_for"]

_FAMILIES: tuple[ModuleType, ...] = (
    host,
    workspace,
    web,
    state,
    memory,
    schedules,
    agents,
    skills,
    model_call,
    findings,
    inspect,
    browser,
    images,
    ask,
)


def _build(tools: Iterable[HostTool]) -> tuple[HostTool, ...]:
    table = tuple(tools)
    for attr in ("mcp_name", "internal_name"):
        names = [getattr(t, attr) for t in table]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise RuntimeError(f"tools share the {attr} {', '.join(duplicates)}")
    for tool in table:
        for prefix in tool_prefixes(tool):
            if prefix not in KNOWN_LABELS:
                raise RuntimeError(f"tool {tool.mcp_name} has the unknown capability prefix {prefix!r}")
    return table


def _instruction_files(families: Iterable[ModuleType]) -> Mapping[str, Traversable]:
    """Each prefix's packaged instruction file, from the family whose tools carry it."""
    found: dict[str, Traversable] = {}
    shipped_by: dict[str, str] = {}
    for family in families:
        name = family.__name__
        folder = resources.files(name) / "instructions"
        if not folder.is_dir():
            continue
        prefixes = {p for t in family.TOOLS for p in tool_prefixes(t)}
        for file in folder.iterdir():
            if not file.name.endswith(".md"):
                continue
            prefix = file.name.removesuffix(".md")
            if prefix not in prefixes:
                raise RuntimeError(f"{name} ships {file.name}, but none of its tools has that prefix")
            if prefix in found:
                raise RuntimeError(f"{shipped_by[prefix]} and {name} both ship {file.name}")
            found[prefix] = file
            shipped_by[prefix] = name
    return found


_TOOLS: tuple[HostTool, ...] = _build(tool for family in _FAMILIES for tool in family.TOOLS)
_BY_MCP = {t.mcp_name: t for t in _TOOLS}
_BY_INTERNAL = {t.internal_name: t for t in _TOOLS}
_INSTRUCTIONS = _instruction_files(_FAMILIES)


def all_tools() -> list[HostTool]:
    """Every tool, in registry order."""
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


def packaged_instructions(prefix: str) -> Traversable | None:
    """The packaged instruction file of the capability ``prefix``, or ``None`` if none ships."""
    return _INSTRUCTIONS.get(prefix)
