"""What a persona's stdio MCP server can see: its workspace, not the host, network or secrets."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.persona_mcp import PersonaMcpManager, workspace_path
from gateway.personas import Persona
from gateway.runtime.agent import ToolOutcome
from gateway.workspaces import shared_workspace, thread_workspace
from tests.integration.persona_mcp.conftest import ECHO_SERVER, SCRIPT, echo_entry, requires_bwrap

SECRET = "s3cr3t-daemon-token"


@pytest.fixture
async def greeter() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that greets whoever connects; yields its port."""

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


def env_of(outcome: ToolOutcome) -> dict[str, str]:
    assert not outcome.is_error, outcome.content
    return dict(line.split("=", 1) for line in outcome.content.splitlines())


@requires_bwrap
async def test_sandboxed_server_sees_only_its_workspace_and_environment(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    settings: Settings,
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
) -> None:
    outside = tmp_path / "outside" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("private", encoding="utf-8")
    monkeypatch.setenv("TALON_TEST_SECRET", SECRET)
    persona = make_persona({"jail": echo_entry(env={"GREETING": "hi"})})
    workspace = workspace_path(settings, persona)
    (workspace / "shared.txt").write_text("for the server", encoding="utf-8")
    manager = make_manager(persona)

    async def call(tool: str, **args: object) -> ToolOutcome:
        return await manager.call(persona, f"jail__{tool}", dict(args))

    assert await call("cwd") == ToolOutcome(str(workspace))
    assert await call("read_file", path=str(workspace / "shared.txt")) == ToolOutcome("for the server")
    assert await call("read_file", path="shared.txt") == ToolOutcome("for the server")
    written = await call("write_file", path="out.txt", text="made inside")
    assert not written.is_error
    assert (workspace / "out.txt").read_text(encoding="utf-8") == "made inside"

    hidden = await call("read_file", path=str(outside))
    assert hidden.is_error and "No such file or directory" in hidden.content
    assert await asyncio.to_thread(os.path.exists, "/etc/shadow")
    shadow = await call("read_file", path="/etc/shadow")
    assert shadow.is_error and "No such file or directory" in shadow.content
    system = await call("write_file", path="/usr/talon-sandbox-test", text="x")
    assert system.is_error and "Read-only file system" in system.content
    assert not await asyncio.to_thread(os.path.exists, "/usr/talon-sandbox-test")

    outcome = await call("env")
    assert SECRET not in outcome.content
    env = env_of(outcome)
    # bubblewrap sets PWD for the working directory it enters.
    assert set(env) == {"GREETING", "HOME", "LANG", "PATH", "PWD"}
    assert (env["GREETING"], env["HOME"], env["PWD"]) == ("hi", str(workspace), str(workspace))


@requires_bwrap
async def test_sandboxed_server_has_no_network_unless_allowed(
    greeter: int, make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"jail": echo_entry(), "online": echo_entry(network=True)})
    manager = make_manager(persona)
    await manager.start()

    blocked = await manager.call(persona, "jail__connect", {"host": "127.0.0.1", "port": greeter})
    assert blocked.is_error and f"cannot connect to 127.0.0.1:{greeter}" in blocked.content
    allowed = await manager.call(persona, "online__connect", {"host": "127.0.0.1", "port": greeter})
    assert allowed == ToolOutcome("hello\n")


async def test_unsandboxed_server_also_gets_only_its_environment(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
) -> None:
    monkeypatch.setenv("TALON_TEST_SECRET", SECRET)
    persona = make_persona({"open": echo_entry(sandbox="none", env={"GREETING": "hi"})})
    manager = make_manager(persona, bwrap="/nonexistent/bwrap")  # not needed without a sandbox

    outcome = await manager.call(persona, "open__env", {})
    assert SECRET not in outcome.content
    env = env_of(outcome)
    assert set(env) == {"GREETING", "HOME", "LANG", "PATH"}
    assert env["HOME"] == str(workspace_path(settings, persona))
    assert await manager.call(persona, "open__cwd", {}) == ToolOutcome(env["HOME"])


@requires_bwrap
async def test_sandboxed_server_sees_no_thread_workspace(
    settings: Settings, make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    """One server serves every thread of its persona, so it gets /shared's folder and never
    ``threads/``, where each thread's files are."""
    persona = make_persona({"jail": echo_entry()})
    threads = settings.data_path / "workspaces" / "alice" / "threads"
    secret = thread_workspace(settings, "alice", 7) / "contract.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("thread seven's contract", encoding="utf-8")
    manager = make_manager(persona)

    async def call(tool: str, **args: object) -> ToolOutcome:
        return await manager.call(persona, f"jail__{tool}", dict(args))

    assert await call("cwd") == ToolOutcome(str(shared_workspace(settings, persona)))
    for path in (str(secret), "../threads/7/contract.txt", str(threads)):
        seen = await call("read_file", path=path)
        assert seen.is_error and "No such file or directory" in seen.content, path
    made = await call("write_file", path="../threads/7/planted.txt", text="x")
    assert made.is_error
    assert not (secret.parent / "planted.txt").exists()


@requires_bwrap
async def test_a_read_only_shared_workspace_is_read_only_for_the_server(
    tmp_path: Path,
    settings: Settings,
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("the operator's checkout", encoding="utf-8")
    persona = replace(make_persona({"jail": echo_entry()}), shared_path=repo, shared_read_only=True)
    shutil.copy(ECHO_SERVER, repo / SCRIPT)
    manager = make_manager(persona)

    async def call(tool: str, **args: object) -> ToolOutcome:
        return await manager.call(persona, f"jail__{tool}", dict(args))

    assert await call("read_file", path="README") == ToolOutcome("the operator's checkout")
    written = await call("write_file", path="new.txt", text="x")
    assert written.is_error and "Read-only file system" in written.content
    assert not (repo / "new.txt").exists()
