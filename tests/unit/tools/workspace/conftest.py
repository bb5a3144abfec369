"""A data dir with one persona's workspace roots, and a ToolContext per thread."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.personas import Persona
from tools.base import ToolContext
from tools.workspace.roots import WorkspaceRoots

READ_WRITE = ("fs.read:persona", "fs.write:persona")


def make_persona(tmp_path: Path, labels: tuple[str, ...] = READ_WRITE, **kwargs: Any) -> Persona:
    return Persona(
        name="assistant",
        provider="local",
        model="m",
        description=None,
        capabilities=labels,
        system_prompt="# Assistant",
        path=tmp_path / "personas" / "assistant",
        **kwargs,
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "data").mkdir()
    return Settings(config_dir=tmp_path, data_dir=Path("data"))


@pytest.fixture
def make_ctx(settings: Settings, tmp_path: Path) -> Callable[..., ToolContext]:
    def build(thread_id: int = 1, labels: tuple[str, ...] = READ_WRITE, **kwargs: Any) -> ToolContext:
        persona = make_persona(tmp_path, labels, **kwargs)
        return ToolContext(thread_id=thread_id, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]

    return build


@pytest.fixture
def ctx(make_ctx: Callable[..., ToolContext]) -> ToolContext:
    return make_ctx()


@pytest.fixture
def workspace(ctx: ToolContext) -> Path:
    """The host folder of thread 1's /workspace."""
    return WorkspaceRoots.for_call(ctx, "read").roots[0].host


@pytest.fixture
def shared(ctx: ToolContext) -> Path:
    """The host folder of the persona's /shared."""
    return WorkspaceRoots.for_call(ctx, "read").roots[1].host


@pytest.fixture
async def greeter() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that greets whoever connects; yields its port."""

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
