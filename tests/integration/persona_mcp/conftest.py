"""Persona MCP servers for tests: a persona whose workspace holds the echo server script."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.persona_mcp import PersonaMcpManager, sandbox_problem, workspace_path
from gateway.personas import Persona

ECHO_SERVER = Path(__file__).resolve().parents[2] / "fakes" / "mcp_echo_server.py"
SCRIPT = "echo_server.py"

requires_bwrap = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"bubblewrap cannot sandbox here: {sandbox_problem()}"
)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(config_dir=tmp_path)


def echo_entry(**overrides: Any) -> dict[str, Any]:
    """An ``mcp_servers`` entry that runs the echo server from the persona's workspace."""
    return {"command": sys.executable, "args": [SCRIPT], **overrides}


@pytest.fixture
def make_persona(settings: Settings) -> Callable[..., Persona]:
    """A persona named ``name`` with ``servers``; its shared workspace holds the echo server script."""

    def make(servers: dict[str, Any], name: str = "alice") -> Persona:
        persona = Persona(
            name=name,
            provider="offline",
            model="m",
            description=None,
            capabilities=(),
            system_prompt="You help.",
            path=settings.config_dir / "personas" / name,
            mcp_servers=servers,
        )
        workspace = workspace_path(settings, persona)
        workspace.mkdir(parents=True, exist_ok=True)
        shutil.copy(ECHO_SERVER, workspace / SCRIPT)
        return persona

    return make


@pytest.fixture
async def make_manager(settings: Settings) -> AsyncIterator[Callable[..., PersonaMcpManager]]:
    """Managers with short backoffs; every one is stopped after the test."""
    made: list[PersonaMcpManager] = []

    def make(*personas: Persona, **options: Any) -> PersonaMcpManager:
        options = {"backoff": 0.05, "max_backoff": 0.5, "start_timeout": 60.0, **options}
        manager = PersonaMcpManager(settings, {p.name: p for p in personas}, **options)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.stop()


def processes_in(folder: Path) -> list[int]:
    """Pids of processes working in ``folder`` or naming it on their command line."""
    found = []
    marker = str(folder).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cwd.startswith(str(folder)) or marker in cmdline:
            found.append(int(entry.name))
    return found
