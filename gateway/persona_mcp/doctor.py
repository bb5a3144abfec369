"""What ``talon doctor`` says about persona MCP servers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from gateway.persona_mcp.sandbox import DEFAULT_BWRAP, sandbox_problem
from gateway.persona_mcp.settings import StdioServerSettings, parse_mcp_servers

if TYPE_CHECKING:
    from gateway.personas import Persona

__all__ = ["doctor_findings"]

Level = Literal["ok", "warn", "fail"]


def doctor_findings(personas: Iterable[Persona], bwrap: str = DEFAULT_BWRAP) -> list[tuple[Level, str]]:
    """Findings about the personas' MCP servers, as (level, text) for the doctor's report.

    Invalid entries fail; ``sandbox: none`` servers warn; when any server is sandboxed,
    bubblewrap must be installed and able to create a sandbox here.
    """
    findings: list[tuple[Level, str]] = []
    sandboxed: list[str] = []
    for persona in personas:
        servers, problems = parse_mcp_servers(persona.name, persona.mcp_servers)
        findings += [("fail", p) for p in problems]
        for name, entry in servers.items():
            if not isinstance(entry, StdioServerSettings):
                continue
            if entry.sandbox == "none":
                findings.append(
                    ("warn", f"MCP server {persona.name}/{name} runs without a sandbox (sandbox: none)")
                )
            else:
                sandboxed.append(f"{persona.name}/{name}")
    if sandboxed:
        problem = sandbox_problem(bwrap)
        if problem:
            findings.append(("fail", f"{problem} (sandboxed: {', '.join(sandboxed)})"))
        else:
            findings.append(("ok", f"bubblewrap sandbox works ({len(sandboxed)} MCP servers use it)"))
    return findings
