"""The webhook endpoint against hostile bodies carrying the right secret: each gets a 4xx
with a short reason, nothing reaches intake, and the next good update is delivered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from connectors.telegram.webhook import MAX_BODY, SECRET_HEADER, WebhookServer
from tests.integration.telegram.test_webhook import SECRET, free_port


@pytest.fixture
async def webhook() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    updates: list[dict[str, Any]] = []

    async def handle(update: dict[str, Any]) -> None:
        updates.append(update)

    port = free_port()
    server = WebhookServer(name="tg", host="127.0.0.1", port=port, path="/hook", secret=SECRET, handle=handle)
    await server.start()
    try:
        yield f"http://127.0.0.1:{port}/hook", updates
    finally:
        await server.stop()


HOSTILE = [
    (b"{not json", 400, "body must be JSON: not JSON (Expecting property name"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "body must be JSON: JSON nested deeper than 64 levels"),
    (b'{"a":' * 100_000, 400, "body must be JSON: JSON nested deeper than 64 levels"),
    (b'{"update_id": "\xff"}', 400, "body must be JSON: not valid UTF-8"),
    (b"[1]", 400, "body must be a JSON object"),
    (b'"' + b"x" * MAX_BODY + b'"', 413, "Maximum request body size"),
]


async def test_hostile_bodies_are_refused_and_the_next_update_arrives(
    webhook: tuple[str, list[dict[str, Any]]],
) -> None:
    url, updates = webhook
    headers = {SECRET_HEADER: SECRET}
    good = {"update_id": 7, "message": {"message_id": 1, "date": 0, "chat": {"id": 5, "type": "private"}}}
    answers = []
    async with aiohttp.ClientSession() as session:
        for body, _, reason in HOSTILE:
            async with session.post(url, data=body, headers=headers) as refused:
                answers.append((refused.status, (await refused.text())[: len(reason)]))
        async with session.post(url, json=good, headers=headers) as accepted:
            assert accepted.status == 200
    assert answers == [(status, reason) for _, status, reason in HOSTILE]
    assert updates == [good]
