"""The workspace tools over ``talon mcp host-tools`` with the real ``mcp`` client: a persona with
the fs and shell labels is offered them, bash makes a PNG in the thread workspace, read_file reads
what bash wrote, and view_image returns the picture as MCP ImageContent."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, types
from PIL import Image

from gateway.sandbox import sandbox_problem
from tests.e2e.daemon import TALON, Daemon, talon_env
from tests.harness import write_config

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")

REPO = Path(__file__).resolve().parents[2]
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}
LABELS = ["fs.read:thread", "fs.write:thread", "shell.exec:sandbox"]


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Path]:
    config = write_config(
        tmp_path, provider=OFFLINE_PROVIDER, model="fake:m", personas={"assistant": {"capabilities": LABELS}}
    )
    async with Daemon(config) as running:
        await running.start(tmp_path / "data")
        yield config
        assert await running.stop() == 0
    assert "Traceback" not in running.log(), running.log()


def _params(config: Path) -> StdioServerParameters:
    command = [*TALON, "mcp", "host-tools", "-c", str(config), "--persona", "assistant", "--thread", "pics"]
    return StdioServerParameters(command=command[0], args=command[1:], env=talon_env(), cwd=str(REPO))


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (12, 9), (250, 200, 0)).save(out, "PNG")
    return out.getvalue()


async def test_bash_read_file_and_view_image_through_the_mcp_client(daemon: Path) -> None:
    png = base64.b64encode(_png()).decode()
    async with asyncio.timeout(90), Client(_params(daemon), read_timeout_seconds=60) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        made = await client.call_tool(
            "bash", {"command": f"echo {png} | base64 -d > dot.png && echo made > log.txt && ls"}
        )
        read = await client.call_tool("read_file", {"file_path": "/workspace/log.txt"})
        viewed = await client.call_tool("view_image", {"file_path": "/workspace/dot.png"})
        refused = await client.call_tool("view_image", {"file_path": "/workspace/log.txt"})
    assert {
        "read_file",
        "list_directory",
        "glob",
        "grep",
        "json_query",
        "extract_document",
        "view_image",
        "write_file",
        "edit_file",
        "patch_apply",
        "bash",
        "wait_for",
    } <= listed
    assert "git_read" not in listed
    shell = json.loads(made.content[0].text)
    assert shell["exit_code"] == 0 and shell["stdout"].split() == ["dot.png", "log.txt"]
    assert read.content[0].text.startswith("     1\tmade")
    words, picture = viewed.content
    assert not viewed.is_error
    assert isinstance(words, types.TextContent) and json.loads(words.text)["width"] == 12
    assert isinstance(picture, types.ImageContent)
    assert picture.mime_type == "image/png" and base64.b64decode(picture.data) == _png()
    assert refused.is_error and "is not a PNG, JPEG, GIF or WebP image" in refused.content[0].text
