"""MCP servers that personas declare in ``mcp_servers:``, run sandboxed and shared.

- :mod:`.settings` validates the entries;
- :mod:`.sandbox` builds the (bubblewrap) command line and environment of a stdio server;
- :mod:`.connection` keeps one server connected and restarts it after failures;
- :mod:`.manager` owns every persona's servers; :mod:`.toolbox` adds their tools to a turn;
- :mod:`.doctor` reports on them for ``talon doctor``.

Names are imported on first use: validating persona.yaml must not load the MCP SDK. Typed code
imports them from their modules; this package's ``__init__`` imports nothing, so that
``gateway.personas`` (which validates ``mcp_servers:`` with :mod:`.settings`) and the
modules here that read a persona form no cycle.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ComposedToolBox": "toolbox",
    "HttpServerSettings": "settings",
    "McpServerSettings": "settings",
    "PersonaMcpManager": "manager",
    "SandboxError": "sandbox",
    "StdioServerSettings": "settings",
    "build_launch": "sandbox",
    "doctor_findings": "doctor",
    "find_bwrap": "sandbox",
    "mcp_server_problems": "settings",
    "parse_mcp_servers": "settings",
    "sandbox_problem": "sandbox",
    "workspace_path": "manager",
}

__all__ = [
    "ComposedToolBox",
    "HttpServerSettings",
    "McpServerSettings",
    "PersonaMcpManager",
    "SandboxError",
    "StdioServerSettings",
    "build_launch",
    "doctor_findings",
    "find_bwrap",
    "mcp_server_problems",
    "parse_mcp_servers",
    "sandbox_problem",
    "workspace_path",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
