"""Helpers shared by the platform end-to-end tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.daemon import Gateway
from tests.store_helpers import fetch_rows


def transcript(body: dict[str, Any]) -> str:
    """Every message text the model received, in order."""
    parts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(block.get("text", "") for block in content)
    return "\n".join(parts)


async def wait_until(done: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def wait_until_stored(gw: Gateway, text: str, timeout: float = 5.0) -> None:
    """Until a message with exactly this text is in the database."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await fetch_rows(gw.components.db, "SELECT id FROM messages WHERE text = ?", (text,)):
        if loop.time() > deadline:
            raise AssertionError(f"{text!r} was not stored")
        await asyncio.sleep(0.02)
