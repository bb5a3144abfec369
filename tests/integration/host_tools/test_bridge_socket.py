"""The bridge socket: owner-only, run identities proven per request, bad input answered
with errors while the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import stat
from typing import Any

import pytest

from tests.integration.host_tools.conftest import BridgeEnv, add_thread
from tests.store_helpers import fetch_row
from tools.bridge import BridgeAuthError
from tools.bridge_server import MAX_LINE


async def _raw(env: BridgeEnv, *lines: bytes, expect: int) -> list[dict[str, Any]]:
    """Send raw lines; read ``expect`` reply lines (or until the server closes)."""
    reader, writer = await asyncio.open_unix_connection(str(env.server.path), limit=MAX_LINE * 4)
    try:
        for line in lines:
            writer.write(line)
        await writer.drain()
        replies = []
        async with asyncio.timeout(5):
            while len(replies) < expect and (line := await reader.readline()):
                replies.append(json.loads(line))
        return replies
    finally:
        writer.close()


async def _still_serving(env: BridgeEnv) -> None:
    identity = env.register("assistant")
    async with env.client(identity) as client:
        reply = await client.call("memory_access", {"operation": "write", "key": "k", "value": "v"})
    assert not reply["is_error"], reply


async def test_socket_is_owner_only(bridge_env: BridgeEnv) -> None:
    mode = bridge_env.server.path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"secret": "forged-secret"}, "the secret does not match the run"),
        ({"run_id": 999_999}, "unknown or finished run"),
        ({"thread_id": "other-thread"}, "the thread does not match the run"),
        ({"persona": "other"}, "the persona does not match the run"),
    ],
    ids=["forged-secret", "wrong-run", "wrong-thread", "wrong-persona"],
)
async def test_forged_claims_are_refused_and_audited(
    bridge_env: BridgeEnv, claims: dict[str, Any], reason: str
) -> None:
    identity = bridge_env.register("assistant")
    if claims.get("thread_id") == "other-thread":
        claims["thread_id"] = await add_thread(bridge_env.db, chat="elsewhere")
    async with bridge_env.client(identity, **claims) as client:
        with pytest.raises(BridgeAuthError, match=reason):
            await client.call("memory_access", {"operation": "write", "key": "k", "value": "secret value"})
        with pytest.raises(BridgeAuthError, match=reason):
            await client.list_tools()
    rows = await bridge_env.audit()
    assert [(r["decision"], r["detail"]) for r in rows] == [
        ("refused", f"authentication failed: {reason}")
    ] * 2
    claimed_run = claims.get("run_id", identity.run_id)
    assert rows[0]["run_id"] == claimed_run and rows[0]["tool"] == "memory_access"
    assert rows[0]["persona"] == claims.get("persona", "assistant")
    # Nothing ran: the item was never written.
    assert await fetch_row(bridge_env.db, "SELECT 1 FROM memory_items") is None


async def test_a_finished_run_is_refused(bridge_env: BridgeEnv) -> None:
    identity = bridge_env.register("assistant")
    bridge_env.bridge.unregister(identity.run_id)
    async with bridge_env.client(identity) as client:
        with pytest.raises(BridgeAuthError, match="unknown or finished run"):
            await client.list_tools()
    in_process = await bridge_env.bridge.call(identity, "memory_access", {"operation": "list"})
    assert in_process.is_error and "this run has ended" in in_process.content


async def test_malformed_lines_get_errors_and_the_server_keeps_serving(bridge_env: BridgeEnv) -> None:
    identity = bridge_env.register("assistant")
    claims = {
        "run_id": identity.run_id,
        "secret": identity.secret,
        "thread_id": identity.thread_id,
        "persona": identity.persona,
    }
    replies = await _raw(
        bridge_env,
        b"{not json\n",
        b"[1, 2, 3]\n",
        b"\xff\xfe\n",
        json.dumps({"id": 1, "op": "explode", **claims}).encode() + b"\n",
        json.dumps({"id": 2, "op": "call", **claims}).encode() + b"\n",
        json.dumps({"id": 3, "op": "call", "tool": "memory_access"}).encode() + b"\n",
        json.dumps({"id": 4, "op": "call", "tool": "no_such_tool", **claims}).encode() + b"\n",
        json.dumps({"id": 5, "op": "call", "tool": "memory_access", "arguments": [1], **claims}).encode()
        + b"\n",
        json.dumps(
            {"id": 6, "op": "call", "tool": "memory_access", "arguments": {"operation": 7}, **claims}
        ).encode()
        + b"\n",
        expect=9,
    )
    by_id = {r["id"]: r for r in replies if r["id"] is not None}
    unnumbered = [r for r in replies if r["id"] is None]
    assert [r["code"] for r in unnumbered] == ["bad_request"] * 3
    assert "not JSON" in unnumbered[0]["error"] and "JSON object" in unnumbered[1]["error"]
    assert by_id[1]["code"] == "bad_request" and "op must be" in by_id[1]["error"]
    assert by_id[2]["code"] == "bad_request" and "needs 'tool'" in by_id[2]["error"]
    assert by_id[3]["code"] == "unauthorized"
    assert by_id[4]["unknown_tool"] and "unknown tool 'no_such_tool'" in by_id[4]["content"]
    assert by_id[5]["is_error"] and "takes its arguments as a JSON object" in by_id[5]["content"]
    assert by_id[6]["is_error"] and by_id[6]["content"] == (
        "invalid arguments for memory_access: operation must be a string"
    )
    await _still_serving(bridge_env)


async def test_an_oversized_line_is_refused_and_the_connection_goes_on(bridge_env: BridgeEnv) -> None:
    listing = json.dumps({"id": 1, "op": "list"}).encode() + b"\n"
    replies = await _raw(bridge_env, b"x" * (MAX_LINE + 10) + b"\n", listing, expect=2)
    assert [r["code"] for r in replies] == ["too_large", "unauthorized"]
    await _still_serving(bridge_env)


async def test_a_client_that_disconnects_mid_call_does_not_hurt_the_server(bridge_env: BridgeEnv) -> None:
    identity = bridge_env.register("assistant")
    _, writer = await asyncio.open_unix_connection(str(bridge_env.server.path))
    writer.write(
        json.dumps(
            {
                "id": 1,
                "op": "call",
                "tool": "memory_access",
                "arguments": {"operation": "list"},
                "run_id": identity.run_id,
                "secret": identity.secret,
                "thread_id": identity.thread_id,
                "persona": identity.persona,
            }
        ).encode()
        + b"\n"
    )
    writer.close()
    await _still_serving(bridge_env)


async def test_concurrent_calls_on_one_connection_each_get_their_reply(bridge_env: BridgeEnv) -> None:
    identity = bridge_env.register("assistant")
    async with bridge_env.client(identity) as client:
        writes = [
            client.call("memory_access", {"operation": "write", "key": f"k{i}", "value": f"v{i}"})
            for i in range(20)
        ]
        await asyncio.gather(*writes)
        reads = await asyncio.gather(
            *(client.call("memory_access", {"operation": "read", "key": f"k{i}"}) for i in range(20))
        )
    assert [json.loads(r["content"])["value"] for r in reads] == [f"v{i}" for i in range(20)]
