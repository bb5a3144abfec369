"""A one-tool MCP server on :func:`tools.mcp_stdio.stdio_server`, for the transport's tests.

``echo_length`` prints a stray line to stdout (as careless code might) and returns the
length of its ``text``; after serving, the app prints ``served`` to its restored stdout.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from tools.mcp_stdio import stdio_server


async def _list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo_length", input_schema=schema)])


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    print("stray output from a tool")
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(text=str(len(text)))])


async def serve() -> None:
    server = Server("stdio-app", on_list_tools=_list_tools, on_call_tool=_call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(serve())
    print("served")
