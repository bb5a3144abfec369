"""The bridge socket: host-tool requests from ``talon mcp host-tools`` processes.

A Unix socket in the data dir (``bridge.sock``), created ``0600`` under umask ``0177``
inside the ``0700`` data dir: only the daemon's user can connect. The protocol is
newline-delimited JSON. A request::

    {"id": 7, "op": "call", "run_id": 12, "secret": "...", "thread_id": 3,
     "persona": "assistant", "tool": "memory_access", "arguments": {...}}

(``op`` ``"list"`` takes no ``tool``/``arguments``; its reply also carries the persona's
tool ``instructions``) is answered by one line carrying the same ``id``::

    {"id": 7, "ok": true, "content": "<JSON text>", "is_error": false, "unknown_tool": false}
    {"id": 8, "ok": true, "tools": [{"name": ..., "description": ..., "inputSchema": {...}}]}
    {"id": 9, "ok": false, "code": "unauthorized", "error": "the secret does not match the run"}

Requests on one connection run concurrently (up to :data:`MAX_IN_FLIGHT`); replies may
come out of order. Malformed, deeply nested or oversized requests (a line longer than
:data:`MAX_LINE`) get an error reply and the connection goes on with the next line.
Nothing a client sends can stop the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gateway.jsonsafe import JSONInputError, loads, read_line
from tools.bridge import Bridge, BridgeAuthError

__all__ = ["MAX_LINE", "SOCKET_NAME", "BridgeServer"]

log = logging.getLogger("talon.bridge")

SOCKET_NAME = "bridge.sock"
MAX_LINE = 1 << 20  # one request; a tool's arguments are far smaller
MAX_IN_FLIGHT = 16


class BridgeServer:
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
        self.path = path
        self.bridge = bridge
        self.instructions = instructions
        self.max_line = max_line
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen (replacing a stale socket file left by a crashed daemon)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        old_umask = os.umask(0o177)  # created 0600 from the start: no window for another user
        try:
            self._server = await asyncio.start_unix_server(
                self._connection, path=str(self.path), limit=self.max_line
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)

    async def stop(self) -> None:
        """Stop listening, cancel open connections (and their calls), remove the socket."""
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        write_lock = asyncio.Lock()
        slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        calls: set[asyncio.Task[None]] = set()

        async def send(obj: dict[str, Any]) -> None:
            async with write_lock:
                writer.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")
                await writer.drain()

        async def serve(request: dict[str, Any]) -> None:
            try:
                await send(await self._answer(request))
            except (ConnectionError, asyncio.CancelledError):
                pass
            except Exception:  # one request's failure never takes the connection down
                log.exception("bridge request failed")
                with contextlib.suppress(Exception):
                    await send(
                        {"id": request.get("id"), "ok": False, "code": "internal", "error": "internal error"}
                    )
            finally:
                slots.release()

        try:
            while True:
                try:
                    line = await read_line(reader, self.max_line)
                except JSONInputError as exc:
                    await send(_error(None, "too_large", f"request {exc}"))
                    continue
                if line is None:
                    break
                if not line.strip():
                    continue
                request = _parse(line, self.max_line)
                if isinstance(request, str):
                    await send(_error(None, "bad_request", request))
                    continue
                await slots.acquire()
                call = asyncio.create_task(serve(request))
                calls.add(call)
                call.add_done_callback(calls.discard)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() ends connections by cancelling them; ending normally keeps asyncio's
            # stream callback from reporting the cancellation as an error.
            pass
        finally:
            for call in list(calls):
                call.cancel()  # the caller is gone: nobody would read the result
            await asyncio.gather(*calls, return_exceptions=True)
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

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
        return {
            "id": rid,
            "ok": True,
            "content": result.content,
            "is_error": result.is_error,
            "unknown_tool": result.unknown_tool,
        }


def _parse(line: bytes, max_line: int) -> dict[str, Any] | str:
    """The request object, or why it is malformed."""
    try:
        request = loads(line, max_bytes=max_line)
    except JSONInputError as exc:
        return f"malformed request: {exc}"
    if not isinstance(request, dict):
        return "malformed request: a request is a JSON object"
    return request


def _error(rid: Any, code: str, message: str) -> dict[str, Any]:
    return {"id": rid, "ok": False, "code": code, "error": message}
