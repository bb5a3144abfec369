"""``__talond_host_tools``: the host tools as a stdio MCP server (``talon mcp host-tools``).

The process holds no tools itself: ``tools/list`` and ``tools/call`` are forwarded to the
daemon's bridge socket, which decides, runs and audits them. Its run identity comes from
the environment (``TALON_BRIDGE_SOCKET``, ``TALON_RUN_ID``, ``TALON_RUN_SECRET``,
``TALON_THREAD_ID``, ``TALON_PERSONA``), as an agent run hands it to its MCP client.
Without one, ``--persona``/``--thread`` open an ad-hoc session with the running daemon
over its control socket; the session ends when this process exits.

Listing shows only the tools the persona may use, with the registry's JSON schemas. The
list is fetched once per process: it depends only on the run's persona and its labels,
which the daemon loads at start and never changes while the run lives (after the run
ends, every call reports that). A call the bridge refuses or a tool that fails comes
back as a result with ``isError: true`` and a message the model can act on; a result with
images (``view_image``) carries them as ``ImageContent`` after its text; a tool this
persona does not have is an MCP protocol error ("unknown tool"), as for any name the
server does not list.

Messages travel over :mod:`tools.mcp_stdio`, a stdio transport without worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from gateway.control_client import ControlClient, DaemonNotRunningError
from gateway.errors import RefusedError
from tools.bridge import BridgeAuthError
from tools.bridge_client import (
    BridgeClient,
    BridgeCredentials,
    BridgeRequestError,
    BridgeUnavailableError,
    credentials_from_env,
)
from tools.mcp_stdio import stdio_server

__all__ = ["SERVER_NAME", "SessionRefusedError", "build_server", "main", "open_session", "serve_stdio"]

SERVER_NAME = "__talond_host_tools"

log = logging.getLogger("talon.mcp")

EXIT_OK = 0
EXIT_FAIL = 1


class SessionRefusedError(RefusedError):
    """The daemon would not open an ad-hoc session; the message says why."""


def build_server(
    client: BridgeClient,
    *,
    instructions: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> Server[Any]:
    """The MCP server forwarding ``tools/list`` and ``tools/call`` to ``client``.

    Args:
        client (:class:`tools.bridge_client.BridgeClient`): A connected bridge client.
        instructions (:obj:`str`, optional): Sent to the MCP client at initialization.
        tools (Sequence[Mapping[:obj:`str`, Any]], optional): The bridge's tool list for this
            run, when already fetched; otherwise the first ``tools/list`` fetches it.
    """
    listing = None if tools is None else _listing(tools)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        nonlocal listing
        if listing is None:
            try:
                listing = _listing(await client.list_tools())
            except (BridgeUnavailableError, BridgeAuthError) as exc:
                raise MCPError(types.INTERNAL_ERROR, f"host tools unavailable: {exc}") from None
        return listing

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            reply = await client.call(params.name, params.arguments)
        except (BridgeUnavailableError, BridgeAuthError) as exc:
            return _error_result(f"host tools unavailable: {exc}")
        except BridgeRequestError as exc:
            return _error_result(str(exc))
        if reply.get("unknown_tool"):
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}. {reply.get('content', '')}")
        content: list[types.ContentBlock] = [types.TextContent(text=str(reply.get("content", "")))]
        content.extend(_images(reply.get("images")))
        return types.CallToolResult(content=content, is_error=bool(reply.get("is_error")))

    server: Server[Any] = Server(
        SERVER_NAME,
        version=_version(),
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # The SDK's default OpenTelemetry middleware opens a span per message; this process
    # installs no exporter, so it would only add latency to every call.
    server.middleware = []
    return server


def _listing(tools: Sequence[Mapping[str, Any]]) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
            for t in tools
        ]
    )


def _images(images: Any) -> list[types.ImageContent]:
    """The images of a bridge reply (``view_image``) as MCP image content."""
    if not isinstance(images, list):
        return []
    return [
        types.ImageContent(data=i["data"], mime_type=i["media_type"])
        for i in images
        if isinstance(i, dict) and isinstance(i.get("data"), str) and isinstance(i.get("media_type"), str)
    ]


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("talon-gateway")
    except PackageNotFoundError:
        return "0"


async def serve_stdio(credentials: BridgeCredentials) -> None:
    """Serve MCP on this process's stdin/stdout as the run in ``credentials`` until stdin closes."""
    async with BridgeClient(credentials) as client:
        first: dict[str, Any] = {}
        with contextlib.suppress(Exception):  # only a head start; tools/list reports real problems
            first = await client.request({"op": "list"})
        server = build_server(
            client, instructions=first.get("instructions") or None, tools=first.get("tools")
        )
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


@contextlib.asynccontextmanager
async def open_session(
    data_dir: Path, *, persona: str | None, thread: str | None
) -> AsyncIterator[BridgeCredentials]:
    """Open an ad-hoc host-tools session with the daemon; yields its credentials.

    The control connection stays open for the session's lifetime: closing it (this
    context ending, or the process exiting) ends the session in the daemon.

    Raises:
        :class:`gateway.control_client.DaemonNotRunningError`: No daemon for ``data_dir``.
        :class:`SessionRefusedError`: The daemon refused the session (the message says why).
    """
    async with contextlib.AsyncExitStack() as connection:
        control = await connection.enter_async_context(ControlClient(data_dir))
        replies = control.stream({"op": "host_tools_session", "persona": persona, "thread": thread})
        first = await anext(replies)
        if first.get("type") != "session":
            raise SessionRefusedError(str(first.get("error") or f"unexpected reply from the daemon: {first}"))
        credentials = BridgeCredentials(
            Path(first["socket"]),
            int(first["run_id"]),
            int(first["thread_id"]),
            str(first["persona"]),
            first["secret"],
        )

        async def watch() -> None:
            try:
                async for _ in replies:  # heartbeats, until the session ends on the daemon's side
                    pass
            except (ConnectionError, ValueError):
                pass
            log.warning("the Talon daemon ended the host-tools session; tool calls will fail")
            await connection.aclose()  # so the daemon's side of the connection ends too

        watcher = asyncio.create_task(watch(), name="session-watch")
        try:
            yield credentials
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


async def _run_session(data_dir: Path, persona: str | None, thread: str | None) -> None:
    async with open_session(data_dir, persona=persona, thread=thread) as credentials:
        await serve_stdio(credentials)


def main(config: str | None, *, persona: str | None, thread: str | None) -> int:
    """``talon mcp host-tools``: serve until the MCP client closes stdin. Returns the exit code."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="talon mcp: %(message)s")
    try:
        credentials = credentials_from_env()
    except ValueError as exc:
        return _fail(str(exc))
    if credentials is not None:
        if persona or thread:
            log.warning("--persona/--thread ignored: the run identity in the environment applies")
        asyncio.run(serve_stdio(credentials))
        return EXIT_OK

    from gateway.config import load_settings

    settings = load_settings(config)
    try:
        asyncio.run(_run_session(settings.data_path, persona, thread))
    except (DaemonNotRunningError, SessionRefusedError) as exc:
        return _fail(str(exc))
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"talon: {message}", file=sys.stderr)
    return EXIT_FAIL
