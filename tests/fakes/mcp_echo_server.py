"""A tiny MCP server for the persona MCP tests, run over stdio: ``python mcp_echo_server.py``.

It only imports the standard library and ``mcp``, so a test can copy this file into a
sandboxed workspace and run it there. Its tools report what the process can see and do:
its environment, files, the network, and ways to misbehave (crash, hang, block).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build_server() -> MCPServer:
    """The echo server with all its tools registered."""
    server = MCPServer("echo", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def env() -> str:
        """The server process's environment, one NAME=value per line, sorted."""
        return "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))

    @server.tool()
    def read_file(path: str) -> str:
        """The text of a file, or a tool error saying why it cannot be read."""
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except OSError as exc:
            raise ToolError(f"cannot read {path}: {exc.strerror}") from None

    @server.tool()
    def write_file(path: str, text: str) -> str:
        """Write a text file (relative paths land in the working directory)."""
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise ToolError(f"cannot write {path}: {exc.strerror}") from None
        return os.path.abspath(path)

    @server.tool()
    def cwd() -> str:
        """The working directory."""
        return os.getcwd()

    @server.tool()
    def connect(host: str, port: int) -> str:
        """Open a TCP connection and read a line from it."""
        try:
            with socket.create_connection((host, port), timeout=2) as sock:
                return sock.recv(100).decode(errors="replace") or "connected"
        except OSError as exc:
            raise ToolError(f"cannot connect to {host}:{port}: {exc}") from None

    @server.tool()
    def crash() -> str:
        """Exit the process at once, mid-call."""
        sys.stderr.write("echo server: crashing on request\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Wait without blocking the server."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    async def block(seconds: float) -> str:
        """Block the server's event loop: a wedged server that answers nothing."""
        time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the point
        return f"blocked {seconds}"

    @server.tool()
    def fail(message: str) -> str:
        """Fail with a tool error the model should see."""
        raise ToolError(message)

    @server.tool(structured_output=False)
    def picture() -> list[object]:
        """A caption and a tiny PNG."""
        return ["a dot", Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * 8, format="png")]

    return server


if __name__ == "__main__":
    asyncio.run(build_server().run_stdio_async())
