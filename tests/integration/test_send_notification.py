"""``talon send``: a notification the gateway refuses says why, as a reply on the control
socket; the gateway method itself raises the refusal, like ``channel_send``'s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.control_client import ControlClient
from gateway.daemon import Gateway
from gateway.poster import NotifyError
from tests.fakes.model_api import FakeAnthropic
from tests.harness import provider_for, running_gateway, write_config
from tests.store_helpers import fetch_row


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with FakeAnthropic() as fake:
        extra = {
            "channels": [
                {"name": "console", "type": "console"},
                {"name": "quiet", "type": "console", "home_chat": None},
            ]
        }
        async with running_gateway(
            write_config(tmp_path, provider=provider_for(fake), extra=extra)
        ) as gateway:
            yield gateway


async def send(gw: Gateway, **request: str | None) -> dict[str, object]:
    async with ControlClient(gw.settings.data_path) as client:
        return await client.call({"op": "send", **request})


@pytest.mark.parametrize(
    ("channel", "message"),
    [
        ("nope", "no channel named 'nope'; use one of console, quiet"),
        ("quiet", "channel 'quiet' has no home_chat; pass --chat ID or set home_chat"),
    ],
)
async def test_a_refused_notification_raises_and_the_socket_replies_with_the_reason(
    gw: Gateway, channel: str, message: str
) -> None:
    with pytest.raises(NotifyError) as refused:
        await gw.components.poster.notify(channel, None, "deploy done")

    assert str(refused.value) == message
    assert await send(gw, channel=channel, chat=None, text="deploy done") == {
        "type": "done",
        "ok": False,
        "error": message,
    }


async def test_an_empty_notification_is_refused_over_the_socket(gw: Gateway) -> None:
    reply = await send(gw, channel="console", chat=None, text="  ")

    assert reply == {"type": "done", "ok": False, "error": "the message is empty"}


async def test_a_notification_over_the_socket_says_where_it_went(gw: Gateway) -> None:
    reply = await send(gw, channel="console", chat=None, text="**deploy** done")
    thread = await fetch_row(
        gw.components.db, "SELECT chat_id FROM threads WHERE id = ?", (reply.get("thread_id"),)
    )

    assert reply["type"] == "done" and reply["ok"] is True and reply["chunks"] == 1
    assert thread is not None and thread["chat_id"] == "main"
