"""Ad-hoc host-tool sessions over the control socket, and the in-process turn toolbox's
identity lifetime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.control_client import ControlClient
from gateway.daemon import Gateway
from gateway.runtime.model import ToolCall
from tests.fakes.model_api import FakeAnthropic
from tests.harness import provider_for, running_gateway, write_config
from tests.integration.host_tools.conftest import add_thread
from tests.store_helpers import fetch_row
from tools.bridge import BridgeAuthError
from tools.bridge_client import BridgeClient
from tools.mcp_server import SessionRefusedError, open_session


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with FakeAnthropic() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["memory.access:thread"]}, "auditor": {}},
        )
        async with running_gateway(config) as gateway:
            gateway.components.host_tools.heartbeat = 0.05
            yield gateway


async def _run_status(gw: Gateway, run_id: int) -> str:
    row = await fetch_row(gw.components.db, "SELECT status FROM runs WHERE id = ?", (run_id,))
    return row["status"]


async def test_a_session_on_a_named_console_thread_works_until_the_client_leaves(gw: Gateway) -> None:
    async with open_session(gw.settings.data_path, persona=None, thread="notes") as credentials:
        thread = await fetch_row(
            gw.components.db,
            "SELECT channel, chat_id, persona FROM threads WHERE id = ?",
            (credentials.thread_id,),
        )
        assert tuple(thread) == ("console", "notes", "assistant")  # created, bound per the console binding
        assert credentials.persona == "assistant"
        assert await _run_status(gw, credentials.run_id) == "session"
        async with BridgeClient(credentials) as client:
            assert [t["name"] for t in await client.list_tools()] == [
                "memory_access",
                "memory_search",
                "memory_update",
                "procedure_write",
            ]
            wrote = await client.call("memory_access", {"operation": "write", "key": "k", "value": "v"})
            assert not wrote["is_error"]
    async with asyncio.timeout(5):
        while await _run_status(gw, credentials.run_id) != "ended":
            await asyncio.sleep(0.02)
    async with BridgeClient(credentials) as client:
        with pytest.raises(BridgeAuthError, match="unknown or finished run"):
            await client.list_tools()
    stored = await fetch_row(gw.components.db, "SELECT thread_id, persona FROM memory_items WHERE key = 'k'")
    assert tuple(stored) == (credentials.thread_id, "assistant")


async def test_a_session_on_a_thread_id_with_another_persona(gw: Gateway) -> None:
    async with open_session(gw.settings.data_path, persona="assistant", thread="chat-1") as first:
        pass
    async with open_session(gw.settings.data_path, persona="auditor", thread=str(first.thread_id)) as second:
        assert (second.thread_id, second.persona) == (first.thread_id, "auditor")
        async with BridgeClient(second) as client:
            assert await client.list_tools() == []
            reply = await client.call("memory_access", {"operation": "list"})
    assert reply["unknown_tool"] and "does not hold" in reply["content"]


@pytest.mark.parametrize(
    ("persona", "thread", "message"),
    [
        ("nobody", "main", "no persona named 'nobody'; loaded: assistant, auditor"),
        ("assistant", "424242", "no thread with id 424242; `talon threads` lists them"),
    ],
)
async def test_a_refused_session_says_why(gw: Gateway, persona: str, thread: str, message: str) -> None:
    with pytest.raises(SessionRefusedError, match=message):
        async with open_session(gw.settings.data_path, persona=persona, thread=thread):
            pass
    # The control socket still serves.
    async with ControlClient(gw.settings.data_path) as control:
        assert (await control.call({"op": "ping"}))["type"] == "done"


async def test_a_turn_toolbox_identity_ends_with_the_toolbox(gw: Gateway) -> None:
    persona = gw.personas["assistant"]
    thread_id = await add_thread(gw.components.db, chat="t")
    with gw.components.host_tools.toolbox(persona, thread_id, run_id=77) as box:
        assert [s.name for s in box.specs()] == [
            "memory_access",
            "memory_search",
            "memory_update",
            "procedure_write",
        ]
        outcome = await box.call(
            ToolCall("c1", "memory_access", {"operation": "write", "key": "a", "value": [1]})
        )
        assert not outcome.is_error and json.loads(outcome.content)["created"] is True
        env = box.environment()
        assert env["TALON_RUN_ID"] == "77" and env["TALON_BRIDGE_SOCKET"].endswith("bridge.sock")
    assert not gw.components.host_tools.bridge.active(box.identity)
    late = await box.call(ToolCall("c2", "memory_access", {"operation": "list"}))
    assert late.is_error and "this run has ended" in late.content
    # A toolbox nobody closed is released when it is dropped.
    dropped = gw.components.host_tools.toolbox(persona, thread_id, run_id=78)
    identity = dropped.identity
    del dropped
    assert not gw.components.host_tools.bridge.active(identity)
