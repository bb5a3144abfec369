"""The bridge socket: host-tool requests from ``talon mcp host-tools`` processes.

A Unix socket in the data dir (``bridge.sock``), created ``0600`` under umask ``0177``
inside the ``0700`` data dir: only the daemon's user can connect. The protocol is
newline-delimited JSON. A request::

    {"id": 7, "op": "call", "run_id": 12, "secret": "...", "thread_id": 3,
     "persona": "assistant", "tool": "memory_access", "arguments": {...}}

(``op`` ``"list"`` takes no ``tool``/``arguments``; its reply also carries the persona's
tool ``instructions``) is answered by one line carrying the same ``id``::

    {"id": 7, "ok": true, "content": "<JSON text>", "is_error": false, "unknown_tool": false}
    {"id": 7, "ok": true, "content": "...", ..., "images": [{"media_type": "image/png", "data": "<base64>"}]}
    {"id": 8, "ok": true, "tools": [{"name": ..., "description": ..., "inputSchema": {...}}]}
    {"id": 9, "ok": false, "code": "unauthorized", "error": "the secret does not match the run"}

Requests on one connection run concurrently (up to :data:`MAX_IN_FLIGHT`); replies may
come out of order. Malformed, deeply nested or oversized requests (a line longer than
:data:`MAX_LINE`) get an error reply and the connection goes on with the next line.
Nothing a client sends can stop the server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gateway.ndjson_socket import NDJSONServer, Reply
from tools.bridge import Bridge, BridgeAuthError

__all__ = ["MAX_LINE", "SOCKET_NAME", "BridgeServer"]

log = logging.getLogger("talon.bridge")

SOCKET_NAME = "bridge.sock"
MAX_LINE = 1 << 20  # one request; a tool's arguments are far smaller
MAX_IN_FLIGHT = 16


class BridgeServer(NDJSONServer):
    """Serves :class:`tools.bridge.Bridge` on a Unix socket.

    Args:
        path (:class:`pathlib.Path`): Where to create the socket (``<data_dir>/bridge.sock``).
        bridge (:class:`tools.bridge.Bridge`): The decision and dispatch core.
        instructions (Callable[[:obj:`str`], Sequence[:obj:`str`]], optional): A persona's tool
            instruction texts by persona name; a ``list`` reply carries them joined.
        max_line (:obj:`int`, optional): The longest request line accepted, in bytes.
    """

    def __init__(
        self,
        path: Path,
        bridge: Bridge,
        *,
        instructions: Callable[[str], Sequence[str]] | None = None,
        max_line: int = MAX_LINE,
    ):
        super().__init__(path, max_line=max_line, max_in_flight=MAX_IN_FLIGHT, skip_blank_lines=True)
        self.bridge = bridge
        self.instructions = instructions

    def encode(self, reply: dict[str, Any]) -> bytes:
        return json.dumps(reply, ensure_ascii=False).encode()

    def refusal(self, reason: str, *, too_long: bool) -> dict[str, Any]:
        if too_long:
            return _error(None, "too_large", f"request {reason}")
        return _error(None, "bad_request", f"malformed request: {reason}")

    def failure(self, request: dict[str, Any], exc: Exception) -> dict[str, Any]:
        log.exception("bridge request failed")
        return _error(request.get("id"), "internal", "internal error")

    async def handle_request(self, request: dict[str, Any], reply: Reply) -> None:
        await reply(await self._answer(request))

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        rid = request.get("id")
        op = request.get("op")
        if op not in ("list", "call"):
            return _error(rid, "bad_request", f"op must be 'list' or 'call', not {str(op)[:40]!r}")
        tool = request.get("tool")
        if op == "call" and (not isinstance(tool, str) or not tool):
            return _error(rid, "bad_request", "a call needs 'tool': the tool's name")
        try:
            identity = await self.bridge.authenticate(
                run_id=request.get("run_id"),
                secret=request.get("secret"),
                thread_id=request.get("thread_id"),
                persona=request.get("persona"),
                tool=tool if isinstance(tool, str) else None,
            )
        except BridgeAuthError as exc:
            return _error(rid, "unauthorized", f"not authorized: {exc}")
        if op == "list":
            reply: dict[str, Any] = {
                "id": rid,
                "ok": True,
                "tools": [
                    {"name": t.mcp_name, "description": t.description, "inputSchema": t.input_schema}
                    for t in self.bridge.tools_for(identity)
                ],
            }
            if self.instructions is not None:
                reply["instructions"] = "\n\n".join(self.instructions(identity.persona))
            return reply
        arguments = request.get("arguments")
        result = await self.bridge.call(identity, tool, {} if arguments is None else arguments)  # type: ignore[arg-type]
        answer: dict[str, Any] = {
            "id": rid,
            "ok": True,
            "content": result.content,
            "is_error": result.is_error,
            "unknown_tool": result.unknown_tool,
        }
        if result.images:
            answer["images"] = [{"media_type": i.media_type, "data": i.data} for i in result.images]
        return answer


def _error(rid: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": rid, "ok": False, "code": code, "error": message}
