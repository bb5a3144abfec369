"""Any MCP client can use the host tools of a running daemon through
``talon mcp host-tools --persona NAME --thread NAME``: the ``mcp`` Python client and the
official MCP Inspector CLI list and call them, refusals come back the way MCP prescribes,
and every decision lands in the audit log."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e.daemon import TALON, Daemon, talon, talon_env
from tests.fakes.images_api import FakeImagesAPI
from tests.fakes.search_api import FakeSearch
from tests.fakes.web_pages import ARTICLE_SENTENCES, NOISE, WebSite, article_html
from tests.harness import write_config
from tests.unit.tools.browser.pages import serve_pages
from tools.browser.chromium import find_chromium

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
# The model is never called here; the provider only has to be valid config.
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}
CAPABILITIES = ["memory.access:thread", "channel.send:elsewhere"]


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[Path, Daemon]]:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={"assistant": {"capabilities": CAPABILITIES}},
    )
    async with Daemon(config) as running:
        await running.start(tmp_path / "data")
        yield config, running
        assert await running.stop() == 0
    assert "Traceback" not in running.log(), running.log()


def _server_command(config: Path, thread: str) -> list[str]:
    return [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", "assistant", "--thread", thread]


def _db(config: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{config.parent / 'data' / 'talon.db'}?mode=ro", uri=True)


def _audit(config: Path) -> list[tuple[Any, ...]]:
    with _db(config) as conn:
        return conn.execute("SELECT tool, decision, status FROM audit_log ORDER BY id").fetchall()


def _session_statuses(config: Path) -> list[str]:
    with _db(config) as conn:
        return [r[0] for r in conn.execute("SELECT status FROM runs WHERE model = 'mcp-session' ORDER BY id")]


async def test_the_python_mcp_client_lists_and_calls_host_tools(daemon: tuple[Path, Daemon]) -> None:
    config, _ = daemon
    command = _server_command(config, "notes")
    params = StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))
    async with asyncio.timeout(60), Client(params, read_timeout_seconds=30) as client:
        listed = await client.list_tools()
        wrote = await client.call_tool(
            "memory_access", {"operation": "write", "key": "city", "value": "Oslo"}
        )
        read = await client.call_tool("memory_access", {"operation": "read", "key": "city"})
        scoped = await client.call_tool("channel_send", {"channelId": "console", "content": "hi"})
        with pytest.raises(MCPError, match="Unknown tool: db_query"):
            await client.call_tool("db_query", {"sql": "SELECT 1"})
    assert [t.name for t in listed.tools] == [
        "channel_send",
        "memory_access",
        "memory_search",
        "memory_update",
        "procedure_write",
    ]
    assert listed.tools[1].input_schema["required"] == ["operation"]
    assert not wrote.is_error and json.loads(read.content[0].text)["value"] == "Oslo"
    assert scoped.is_error and "channelId 'console' is not permitted" in scoped.content[0].text
    async with asyncio.timeout(10):
        while _session_statuses(config) != ["ended"] or len(_audit(config)) < 6:
            await asyncio.sleep(0.05)
    assert _audit(config) == [
        ("memory_access", "allowed", None),
        ("memory_access", "result", "ok"),
        ("memory_access", "allowed", None),
        ("memory_access", "result", "ok"),
        ("channel_send", "refused", None),
        ("db_query", "refused", None),
    ]


async def test_without_a_daemon_the_server_fails_with_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, provider=OFFLINE_PROVIDER, model="fake:m")
    code, out, err = await talon("mcp", "host-tools", "-c", str(config), "--persona", "assistant", timeout=60)
    assert code == 1 and out == ""
    assert err.strip().count("\n") == 0 and "not running" in err


async def _inspector(config: Path, *method: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(INSPECTOR),
        "--cli",
        *_server_command(config, "notes"),
        *method,
        env=talon_env(),
        cwd=str(REPO),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.skipif(
    not os.access(INSPECTOR, os.X_OK),
    reason=f"MCP Inspector not installed at {INSPECTOR} (.ci/run installs it with npm)",
)
async def test_the_mcp_inspector_cli_lists_and_calls_host_tools(daemon: tuple[Path, Daemon]) -> None:
    config, _ = daemon
    listed, wrote, scoped, refused = await asyncio.gather(
        _inspector(config, "--method", "tools/list"),
        _inspector(
            config,
            "--method",
            "tools/call",
            "--tool-name",
            "memory_access",
            "--tool-arg",
            "operation=write",
            "key=city",
            "value=Oslo",
        ),
        _inspector(
            config,
            "--method",
            "tools/call",
            "--tool-name",
            "channel_send",
            "--tool-arg",
            "channelId=console",
            "content=hi",
        ),
        _inspector(config, "--method", "tools/call", "--tool-name", "db_query", "--tool-arg", "sql=SELECT 1"),
    )
    read = await _inspector(
        config,
        "--method",
        "tools/call",
        "--tool-name",
        "memory_access",
        "--tool-arg",
        "operation=read",
        "key=city",
    )
    assert listed[0] == 0, listed
    tools = json.loads(listed[1])["tools"]
    assert [t["name"] for t in tools] == [
        "channel_send",
        "memory_access",
        "memory_search",
        "memory_update",
        "procedure_write",
    ]
    assert tools[1]["inputSchema"]["properties"]["operation"]["enum"] == ["read", "write", "delete", "list"]
    assert wrote[0] == 0 and json.loads(wrote[1])["isError"] is False, wrote
    assert read[0] == 0 and json.loads(json.loads(read[1])["content"][0]["text"])["value"] == "Oslo", read
    # A scope refusal is a tool result the model can act on (the Inspector prints it, exit 0) ...
    scoped_result = json.loads(scoped[1])
    assert scoped[0] == 0 and scoped_result["isError"] is True, scoped
    assert "channelId 'console' is not permitted" in scoped_result["content"][0]["text"]
    # ... a tool the persona does not have is an MCP error, and the Inspector exits non-zero.
    assert refused[0] != 0 and "Unknown tool: db_query" in refused[2], refused
    assert "db.query:own" in refused[2]


async def test_stopping_the_daemon_ends_open_sessions_cleanly(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        provider=OFFLINE_PROVIDER,
        model="fake:m",
        personas={"assistant": {"capabilities": CAPABILITIES}},
    )
    command = _server_command(config, "notes")
    params = StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))
    async with Daemon(config) as daemon:
        await daemon.start(tmp_path / "data")
        async with asyncio.timeout(60), Client(params, read_timeout_seconds=30) as client:
            await client.call_tool("memory_access", {"operation": "list"})
            assert await daemon.stop() == 0
            after = await client.call_tool("memory_access", {"operation": "list"})
    assert after.is_error and "host tools unavailable" in after.content[0].text
    assert _session_statuses(config) == ["ended"]
    log = daemon.log()
    assert "Traceback" not in log and "ERROR" not in log, log


async def test_the_web_tools_work_through_talon_mcp_host_tools(tmp_path: Path) -> None:
    token = "e2e-token-51d0c3aa9f"

    async def api(request: web.Request) -> web.Response:
        return web.json_response({"auth": request.headers.get("Authorization")})

    async with WebSite() as site, FakeSearch("brave", api_key="brave-key") as search:
        site.page("/mills", article_html())
        site.routes["/api/me"] = api
        config = write_config(
            tmp_path,
            provider=OFFLINE_PROVIDER,
            model="fake:m",
            extra={
                "net_http": {"allowed_private_hosts": ["127.0.0.1"]},
                "web_search": {"provider": "brave", "url": search.url, "api_key": "${BRAVE_KEY}"},
            },
            personas={
                "assistant": {
                    "capabilities": ["net.http:egress", "web.search"],
                    "credentials": ["MILLS_TOKEN"],
                }
            },
        )
        env = talon_env({"MILLS_TOKEN": token, "BRAVE_KEY": "brave-key"})
        async with Daemon(config, env) as running:
            await running.start(tmp_path / "data")
            command = _server_command(config, "web")
            # It reads talon.yaml too, whose ${BRAVE_KEY} must resolve; the token stays the daemon's.
            server_env = talon_env({"BRAVE_KEY": "brave-key"})
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=server_env, cwd=str(REPO)
            )
            async with asyncio.timeout(90), Client(params, read_timeout_seconds=60) as client:
                listed = await client.list_tools()
                page = await client.call_tool("web_scrape", {"url": site.url("/mills")})
                me = await client.call_tool(
                    "web_request", {"url": site.url("/api/me"), "method": "GET", "credential": "MILLS_TOKEN"}
                )
                found = await client.call_tool("web_scrape", {"mode": "search", "query": "tide mills"})
                blocked = await client.call_tool(
                    "web_request", {"url": "http://169.254.169.254/", "method": "GET"}
                )
            assert await running.stop() == 0
            log = running.log()
    names = [t.name for t in listed.tools]
    assert {"net_http", "web_request", "web_scrape"} <= set(names)
    content = json.loads(page.content[0].text)["content"]
    assert ARTICLE_SENTENCES[0] in content and NOISE[2] not in content
    assert not me.is_error and json.loads(me.content[0].text)["body"] == {"auth": "Bearer [credential]"}
    assert site.seen_headers[-1]["Authorization"] == f"Bearer {token}"
    results = json.loads(found.content[0].text)["results"]
    assert results[0]["title"] == "tide mills: result 1"
    assert search.requests[0].headers["X-Subscription-Token"] == "brave-key"
    assert blocked.is_error and "a cloud metadata address" in blocked.content[0].text
    with _db(config) as conn:
        audit = conn.execute("SELECT tool, decision, status, detail FROM audit_log ORDER BY id").fetchall()
    assert token not in json.dumps(audit) and token not in log
    assert ("web_request", "result", "error") in [row[:3] for row in audit]


async def test_image_generate_works_through_talon_mcp_host_tools(tmp_path: Path) -> None:
    async with FakeImagesAPI() as images:
        config = write_config(
            tmp_path,
            provider=OFFLINE_PROVIDER,
            model="fake:m",
            extra={"images": {"provider": "fake"}},
            # An MCP session has no person in the chat: the persona opts in to unattended images.
            personas={"assistant": {"capabilities": ["image.generate"], "images": {"unattended": True}}},
        )
        text = config.read_text().replace("http://127.0.0.1:9/v1", images.base_url)
        config.write_text(text)
        async with Daemon(config) as running:
            await running.start(tmp_path / "data")
            command = _server_command(config, "pictures")
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO)
            )
            async with asyncio.timeout(60), Client(params, read_timeout_seconds=30) as client:
                listed = await client.list_tools()
                made = await client.call_tool("image_generate", {"prompt": "a tide mill", "quality": "low"})
                bad = await client.call_tool("image_generate", {"prompt": "x", "output_format": "bmp"})
            assert await running.stop() == 0
    assert [t.name for t in listed.tools] == ["image_generate", "image_edit"]
    assert not made.is_error, made.content[0].text
    result = json.loads(made.content[0].text)
    saved = next(
        (tmp_path / "data" / "workspaces" / "assistant" / "threads").glob("*/generated-images/*.png")
    )
    assert result["path"] == f"/workspace/generated-images/{saved.name}"
    assert saved.read_bytes().startswith(b"\x89PNG") and result["bytes"] == saved.stat().st_size
    assert [r["prompt"] for r in images.requests] == ["a tide mill"]
    assert bad.is_error and "output_format must be one of png, webp, jpeg" in bad.content[0].text


@pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed")
async def test_the_browser_tools_work_through_talon_mcp_host_tools(tmp_path: Path) -> None:
    async with serve_pages() as pages:
        config = write_config(
            tmp_path,
            provider=OFFLINE_PROVIDER,
            model="fake:m",
            extra={"net_http": {"allowed_private_hosts": ["127.0.0.1"]}},
            personas={"assistant": {"capabilities": ["browser.use"]}},
        )
        async with Daemon(config) as running:
            await running.start(tmp_path / "data")
            command = _server_command(config, "browse")
            params = StdioServerParameters(
                command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO)
            )
            async with asyncio.timeout(90), Client(params, read_timeout_seconds=60) as client:
                listed = await client.list_tools()
                opened = await client.call_tool("browser_open", {"url": pages.url("/")})
                clicked = await client.call_tool(
                    "browser_act", {"action": "click", "target": {"kind": "semantic", "text": "Press me"}}
                )
                blocked = await client.call_tool("browser_open", {"url": "http://169.254.169.254/latest/"})
            assert await running.stop() == 0
            log = running.log()
    assert [t.name for t in listed.tools] == [
        "browser_open", "browser_observe", "browser_act", "browser_screenshot", "browser_close"
    ]  # fmt: skip
    assert not opened.is_error and json.loads(opened.content[0].text)["title"] == "Counter"
    assert json.loads(clicked.content[0].text)["text"].startswith("Clicked!")
    assert blocked.is_error and "a cloud metadata address" in blocked.content[0].text
    assert "Traceback" not in log, log
