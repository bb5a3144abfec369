"""A persona's MCP server: listed and called by namespaced name, restarted, timed out, stopped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gateway.config import Settings
from gateway.persona_mcp import ComposedToolBox, PersonaMcpManager, sandbox_problem, workspace_path
from gateway.personas import Persona
from gateway.runtime.agent import ToolOutcome
from gateway.runtime.model import ToolCall, ToolSpec
from tests.integration.persona_mcp.conftest import echo_entry, processes_in, requires_bwrap

pytestmark = requires_bwrap


class HostBox:
    """The turn's host tools, as far as routing is concerned: one tool, calls recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closed = False

    def specs(self) -> Sequence[ToolSpec]:
        return (ToolSpec("memory_access", "Per-thread memory.", {"type": "object"}),)

    async def call(self, call: ToolCall) -> ToolOutcome:
        self.calls.append(call.name)
        return ToolOutcome("host result")

    def close(self) -> None:
        self.closed = True


async def test_tools_are_offered_namespaced_next_to_host_tools_and_called(
    make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"echo": echo_entry()})
    manager = make_manager(persona)
    await manager.start()
    host = HostBox()
    box = ComposedToolBox(host, manager, persona, await manager.specs(persona))

    names = [s.name for s in box.specs()]
    assert names[0] == "memory_access"
    assert {"echo__echo", "echo__crash", "echo__picture"} <= set(names)
    echo_spec = next(s for s in box.specs() if s.name == "echo__echo")
    assert echo_spec.description == "Return the text unchanged."
    assert echo_spec.input_schema["properties"]["text"]["type"] == "string"

    assert await box.call(ToolCall("1", "echo__echo", {"text": "hello there"})) == ToolOutcome("hello there")
    assert await box.call(ToolCall("2", "echo__picture", {})) == ToolOutcome(
        "a dot\n[image: image/png, 16 bytes]"
    )
    failed = await box.call(ToolCall("3", "echo__fail", {"message": "disk is full"}))
    assert failed.is_error and "disk is full" in failed.content
    assert await box.call(ToolCall("4", "memory_access", {})) == ToolOutcome("host result")
    assert host.calls == ["memory_access"]
    box.close()
    assert host.closed


async def test_a_crashed_server_is_restarted_on_the_next_call(
    make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"echo": echo_entry()})
    manager = make_manager(persona)
    assert await manager.call(persona, "echo__echo", {"text": "one"}) == ToolOutcome("one")

    crashed = await manager.call(persona, "echo__crash", {})
    assert crashed.is_error
    assert "MCP server echo stopped while running crash" in crashed.content
    assert "crashing on request" in crashed.content  # its stderr, for whoever reads the error
    assert "restarted on the next call" in crashed.content

    assert await manager.call(persona, "echo__echo", {"text": "two"}) == ToolOutcome("two")


async def test_a_call_that_times_out_fails_and_the_server_keeps_serving(
    make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"echo": echo_entry(timeout=0.5)})
    manager = make_manager(persona)
    await manager.specs(persona)

    started = time.monotonic()
    slow = await manager.call(persona, "echo__sleep", {"seconds": 30})
    assert time.monotonic() - started < 5
    assert slow == ToolOutcome(
        "sleep did not finish within 0.5 s and was cancelled. Try a smaller request, or continue without it.",
        is_error=True,
    )
    assert await manager.call(persona, "echo__echo", {"text": "still here"}) == ToolOutcome("still here")

    # A server whose event loop is stuck is not left wedged: it is replaced.
    wedged = await manager.call(persona, "echo__block", {"seconds": 60})
    assert wedged.is_error and "did not finish within 0.5 s" in wedged.content
    assert await manager.call(persona, "echo__echo", {"text": "fresh"}) == ToolOutcome("fresh")


async def test_stop_ends_every_server_process(
    settings: Settings, make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"echo": echo_entry()})
    manager = make_manager(persona)
    await manager.start()
    assert await manager.specs(persona)
    workspace = workspace_path(settings, persona)
    assert processes_in(workspace)

    await manager.stop()
    for _ in range(100):
        if not processes_in(workspace):
            break
        await asyncio.sleep(0.05)
    assert processes_in(workspace) == []
    after = await manager.call(persona, "echo__echo", {"text": "x"})
    assert after == ToolOutcome("MCP server echo is shut down", is_error=True)


async def test_missing_bubblewrap_refuses_to_start_unconfined(
    tmp_path: Path,
    settings: Settings,
    make_persona: Callable[..., Persona],
    make_manager: Callable[..., PersonaMcpManager],
) -> None:
    missing = str(tmp_path / "no-such-bwrap")
    persona = make_persona({"echo": echo_entry()})
    manager = make_manager(persona, bwrap=missing)
    await manager.start()

    assert await manager.specs(persona) == []
    outcome = await manager.call(persona, "echo__echo", {"text": "hi"})
    assert outcome.is_error
    assert outcome.content.startswith(
        f"MCP server echo failed to start: bubblewrap ({missing}) is not installed; "
        "install it or set sandbox: none for echo"
    )
    assert processes_in(workspace_path(settings, persona)) == []
    assert sandbox_problem(missing) == (
        f"bubblewrap ({missing}) is not installed; install it or set sandbox: none for the servers that use it"
    )
    assert sandbox_problem() is None
