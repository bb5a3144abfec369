"""A hostile MCP server for the persona MCP tests: ``python hostile_mcp_server.py``.

It speaks just enough JSON-RPC over stdio by hand (initialize, tools/list, tools/call) to
answer a call to a tool with the hostile line that tool is named after instead of a reply.
``echo`` answers properly, with the server's pid.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

DEEP = b"[" * 100_000 + b"]" * 100_000


def _result(rid: int, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


HOSTILE: dict[str, Callable[[int], bytes]] = {
    "malformed": lambda rid: b"{not json",
    "deep": lambda rid: DEEP,
    "deep_reply": lambda rid: b'{"jsonrpc": "2.0", "id": %d, "result": ' % rid + b'{"a": ' * 100_000,
    "huge": lambda rid: _result(rid, {"content": [{"type": "text", "text": "x" * (17 << 20)}]}),
    "bad_utf8": lambda rid: b'{"jsonrpc": "2.0", "id": %d, "result": {"text": "\xff"}}' % rid,
    "not_rpc": lambda rid: _result(rid, 5),
}


def _answer(request: dict[str, object]) -> bytes | None:
    rid, method = request.get("id"), request.get("method")
    if not isinstance(rid, int):
        return None  # a notification
    if method == "initialize":
        params = request.get("params") or {}
        assert isinstance(params, dict)
        return _result(
            rid,
            {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            },
        )
    if method == "tools/list":
        names = ["echo", *HOSTILE]
        return _result(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]})
    if method == "tools/call":
        params = request.get("params") or {}
        assert isinstance(params, dict)
        hostile = HOSTILE.get(str(params.get("name")))
        if hostile is not None:
            return hostile(rid)
        return _result(rid, {"content": [{"type": "text", "text": str(os.getpid())}]})
    return _result(rid, {})


def main() -> None:
    for line in sys.stdin.buffer:
        reply = _answer(json.loads(line))
        if reply is not None:
            sys.stdout.buffer.write(reply + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
