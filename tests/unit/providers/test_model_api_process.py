"""The stand-in model API run as its own process, as daemon end-to-end tests use it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from gateway.config import ProviderSettings
from gateway.runtime.model import ChatMessage, ModelRequest
from gateway.runtime.providers import build_provider

ROOT = Path(__file__).resolve().parents[3]


async def start_fake(kind: str, port_file: Path, max_seconds: float) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.model_api",
        "--kind",
        kind,
        "--port-file",
        str(port_file),
        "--max-seconds",
        str(max_seconds),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_standalone_server_echoes_until_terminated(tmp_path: Path, kind: str) -> None:
    port_file = tmp_path / "url"
    process = await start_fake(kind, port_file, max_seconds=60)
    try:
        for _ in range(200):
            if port_file.exists() or process.returncode is not None:
                break
            await asyncio.sleep(0.05)
        provider = build_provider(
            "local", ProviderSettings(type=kind, api_key="k", base_url=port_file.read_text())
        )
        try:
            request = ModelRequest("m", "", (ChatMessage("user", "ping"),))
            assert (await provider.complete(request)).text == "echo: ping"
        finally:
            await provider.aclose()
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_standalone_server_stops_after_max_seconds(tmp_path: Path) -> None:
    port_file = tmp_path / "url"
    process = await start_fake("openai", port_file, max_seconds=0.2)
    try:
        assert await asyncio.wait_for(process.wait(), 30) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert port_file.read_text().endswith("/v1")
