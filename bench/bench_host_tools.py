"""Host-tool call latency: in process, and through ``talon mcp host-tools`` and the bridge.

- in process: :meth:`tools.bridge.Bridge.call` (decision, schema check, handler, two audit
  rows) for ``memory_access`` write and read, as the agent loop calls it;
- over MCP: a running daemon (``talon run``), ``talon mcp host-tools --persona --thread``
  as a stdio subprocess, and a client timing each ``tools/call`` round trip (client ->
  stdio server -> bridge socket -> daemon -> back), after startup;
- ``tools/list`` over MCP for a persona holding every capability label (the server
  fetches the list from the daemon once, at start: this times a warm list).

The targets time Talon's part of a call, so the judged client is :class:`WireClient`: it
speaks MCP's stdio wire protocol (the ``initialize`` handshake, then one JSON-RPC request
per line, each reply parsed and checked) and does nothing else. MCP clients add their own
work on top (Claude Code's, the Inspector's, the ``mcp`` Python SDK's); the same calls
through the ``mcp`` Python SDK's ``Client`` are reported as reference lines.

Each target applies to each operation: write and read are timed and judged separately.

For reference it also times the ``memory_access`` handler alone (no bridge), and both
clients against the same MCP server with a stand-in bridge that answers at once, over
talon's stdio transport (the floor no bridge can beat) and, with the SDK client, over the
SDK's ``stdio_server`` (what the transport saves).

    python -m bench.bench_host_tools [--calls 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from gateway.config import load_settings
from gateway.labels import KNOWN_LABELS, example_label
from gateway.personas import load_personas
from gateway.store.db import DB_FILE, open_database
from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.harness import write_config
from tools import registry
from tools.base import ToolContext
from tools.bridge import Bridge

PROVIDER = {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "none"}
MCP_PROTOCOL = "2025-06-18"
TARGETS = {
    "in process write p50": 0.5,
    "in process read p50": 0.5,
    "over MCP write p50": 3.0,
    "over MCP read p50": 3.0,
    "over MCP write p99": 15.0,
    "over MCP read p99": 15.0,
    "tools/list p50": 5.0,
}
TRANSPORTS = ("talon", "sdk")


def every_label() -> list[str]:
    return [example_label(prefix) for prefix in KNOWN_LABELS]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def timed(n: int, call: Callable[[int], Awaitable[Any]]) -> list[float]:
    """Milliseconds per call, ``n`` calls in sequence."""
    out = []
    for i in range(n):
        started = time.perf_counter()
        await call(i)
        out.append((time.perf_counter() - started) * 1000)
    return out


async def in_process(root: Path, calls: int) -> dict[str, list[float]]:
    settings = load_settings(root / "talon.yaml")
    db = await open_database(settings.data_path / DB_FILE)
    try:

        def write(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(
                "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('console', 'bench', 0, 0) "
                "RETURNING id"
            ).fetchall()

        rows = await db.run_transaction(write)
        bridge = Bridge(db=db, settings=settings, personas=load_personas(settings))
        identity = bridge.register(1, rows[0][0], "assistant")

        async def write(i: int) -> None:
            result = await bridge.call(
                identity, "memory_access", {"operation": "write", "key": f"k{i % 50}", "value": "v"}
            )
            assert not result.is_error, result.content

        async def read(i: int) -> None:
            result = await bridge.call(identity, "memory_access", {"operation": "read", "key": f"k{i % 50}"})
            assert not result.is_error, result.content

        ctx = ToolContext(rows[0][0], bridge.personas["assistant"], db, settings)
        handler = registry.by_mcp_name("memory_access").handler  # type: ignore[union-attr]

        async def handler_only(i: int) -> None:
            await handler(ctx, {"operation": "read", "key": f"k{i % 50}"})

        await timed(100, write)  # warm up
        result = {
            "write": await timed(calls, write),
            "read": await timed(calls, read),
            "handler read": await timed(calls, handler_only),
        }
        await bridge.audit.flush()
        return result
    finally:
        await db.close()


class WireClient:
    """An MCP client that speaks the stdio wire protocol and nothing more: the
    ``initialize`` handshake, then one JSON-RPC request per line, in sequence.

    Args:
        command (Sequence[:obj:`str`]): The server's command line.
        env (Mapping[:obj:`str`, :obj:`str`], optional): Its environment.
    """

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None):
        self.command = list(command)
        self.env = None if env is None else dict(env)
        self._ids = itertools.count(1)
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> WireClient:
        self._process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=self.env
        )
        info = {"name": "bench-wire-client", "version": "1"}
        await self.request(
            "initialize", {"protocolVersion": MCP_PROTOCOL, "capabilities": {}, "clientInfo": info}
        )
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        async with asyncio.timeout(10):
            await self._process.wait()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its ``result``. Raises on an error reply."""
        rid = next(self._ids)
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        assert self._process is not None and self._process.stdout is not None
        reply = json.loads(await self._process.stdout.readline())
        if reply.get("id") != rid or "result" not in reply:
            raise RuntimeError(f"unexpected reply to {method}: {reply}")
        return reply["result"]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError") or result["content"][0]["type"] != "text":
            raise RuntimeError(f"{name} failed: {result}")
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        return list((await self.request("tools/list"))["tools"])

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(message).encode() + b"\n")
        await self._process.stdin.drain()


class SdkClient:
    """The ``mcp`` Python SDK's ``Client``, with :class:`WireClient`'s methods."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None):
        params = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=None if env is None else dict(env)
        )
        self._client = Client(params, read_timeout_seconds=30)

    async def __aenter__(self) -> SdkClient:
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.__aexit__(*exc)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        result = await self._client.call_tool(name, arguments)
        if result.is_error:
            raise RuntimeError(f"{name} failed: {result.content}")
        return result

    async def list_tools(self) -> list[Any]:
        return list((await self._client.list_tools(cache_mode="refresh")).tools)


CLIENTS: dict[str, Callable[..., WireClient | SdkClient]] = {"wire": WireClient, "sdk": SdkClient}


async def over_mcp(root: Path, calls: int) -> dict[str, dict[str, list[float]]]:
    """Per client kind: write, read and tools/list times through a running daemon."""
    config = root / "talon.yaml"
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", "assistant", "--thread", "bench"]
    results: dict[str, dict[str, list[float]]] = {}
    async with Daemon(config) as daemon:
        await daemon.start(root / "data")
        for kind, make in CLIENTS.items():
            async with make(command, talon_env()) as client:

                async def write(i: int) -> None:
                    await client.call_tool(
                        "memory_access", {"operation": "write", "key": f"k{i % 50}", "value": "v"}
                    )

                async def read(i: int) -> None:
                    await client.call_tool("memory_access", {"operation": "read", "key": f"k{i % 50}"})

                async def listing(i: int) -> None:
                    assert len(await client.list_tools()) == len(registry.all_tools())

                await timed(50, write)  # warm up
                results[kind] = {
                    "write": await timed(calls, write),
                    "read": await timed(calls, read),
                    "tools/list": await timed(max(50, calls // 5), listing),
                }
        try:
            code = await daemon.stop()
        except TimeoutError:
            code = None
        if code != 0:
            print(
                f"warning: talon run did not stop cleanly ({code}):\n{daemon.log()[-2000:]}", file=sys.stderr
            )
    return results


class _InstantBridge:
    """Stands in for the bridge client: answers every request at once."""

    async def list_tools(self) -> list[dict[str, Any]]:
        return [
            {"name": t.mcp_name, "description": t.description, "inputSchema": t.input_schema}
            for t in registry.all_tools()
        ]

    async def call(self, tool: str, arguments: Any) -> dict[str, Any]:
        return {"content": '{"ok": true}', "is_error": False, "unknown_tool": False}


async def serve_instant(transport: str) -> None:
    from mcp.server import stdio as sdk_stdio

    from tools import mcp_stdio
    from tools.mcp_server import build_server

    stdio_server = mcp_stdio.stdio_server if transport == "talon" else sdk_stdio.stdio_server
    server = build_server(_InstantBridge())  # type: ignore[arg-type]
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def floor(client_kind: str, transport: str, calls: int) -> dict[str, list[float]]:
    command = [sys.executable, "-m", "bench.bench_host_tools", "--instant-server", transport]
    async with CLIENTS[client_kind](command) as client:

        async def call(i: int) -> None:
            await client.call_tool("memory_access", {"operation": "read", "key": "k"})

        async def listing(i: int) -> None:
            await client.list_tools()

        await timed(50, call)
        return {"call": await timed(calls, call), "tools/list": await timed(max(50, calls // 5), listing)}


FLOORS = (("wire", "talon"), ("sdk", "talon"), ("sdk", "sdk"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000, help="calls per operation")
    ap.add_argument("--instant-server", choices=TRANSPORTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.instant_server:
        asyncio.run(serve_instant(args.instant_server))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_config(
            root,
            provider=PROVIDER,
            model="fake:m",
            extra={"log_level": "warning"},
            personas={"assistant": {"capabilities": every_label()}},
        )
        local = asyncio.run(in_process(root, args.calls))
        remote = asyncio.run(over_mcp(root, args.calls))
        floors = {(c, t): asyncio.run(floor(c, t, args.calls)) for c, t in FLOORS}
    rows: dict[str, float] = {}
    for kind, samples in (("in process", local), ("over MCP", remote["wire"])):
        for op in ("write", "read"):
            rows[f"{kind} {op} p50"] = pct(samples[op], 0.5)
            rows[f"{kind} {op} p99"] = pct(samples[op], 0.99)
    rows["tools/list p50"] = pct(remote["wire"]["tools/list"], 0.5)
    rows["tools/list p99"] = pct(remote["wire"]["tools/list"], 0.99)
    for op in ("write", "read", "tools/list"):
        rows[f"ref: SDK client {op} p50"] = pct(remote["sdk"][op], 0.5)
    rows["ref: handler read p50"] = pct(local["handler read"], 0.5)
    for (client, transport), samples in floors.items():
        rows[f"ref: floor call p50, {client} client, {transport} stdio"] = pct(samples["call"], 0.5)
        rows[f"ref: floor list p50, {client} client, {transport} stdio"] = pct(samples["tools/list"], 0.5)
    print(f"host tools: memory_access write and read, {args.calls} calls each (ms)", file=sys.stdout)
    for key, value in rows.items():
        target = TARGETS.get(key)
        verdict = (
            "" if target is None else (f"  (target < {target:g}: {'ok' if value < target else 'MISSED'})")
        )
        print(f"  {key:>44}: {value:8.3f}{verdict}")


if __name__ == "__main__":
    main()
