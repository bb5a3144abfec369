"""Starting, reconnecting and stopping the Discord connector."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from connectors.base import (
    Connector,
    ConnectorStartError,
    ErrorClass,
    OutboundChunk,
    RenderedChunk,
    ThreadKey,
)
from connectors.discord_bot import DiscordConnector
from tests.fakes.discord_api import FakeDiscord
from tests.integration.discord.conftest import CHANNEL, Recorder, StartConnector, discord_settings, wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_bad_token_fails_start_with_a_clear_message(
    fake: FakeDiscord, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    connector = DiscordConnector(discord_settings(fake, token="not-the-token"), files_dir=tmp_path)

    with pytest.raises(ConnectorStartError) as info:
        await connector.start(Recorder())

    message = str(info.value)
    assert message.startswith(f"{CHANNEL}: ")
    assert "rejected the bot token" in message and "DISCORD_BOT_TOKEN" in message
    assert "not-the-token" not in message and "not-the-token" not in caplog.text
    assert fake.gateway.identifies == []
    await connector.stop()


async def test_empty_token_fails_start(fake: FakeDiscord, tmp_path: Path) -> None:
    connector = DiscordConnector(discord_settings(fake, token="  "), files_dir=tmp_path)
    with pytest.raises(ConnectorStartError, match="token is empty"):
        await connector.start(Recorder())


async def test_unreachable_api_fails_start(tmp_path: Path) -> None:
    settings = discord_settings(FakeDiscord(), api_base_url=f"http://127.0.0.1:{free_port()}")
    connector = DiscordConnector(settings, files_dir=tmp_path)
    with pytest.raises(ConnectorStartError, match="cannot reach the Discord API"):
        await connector.start(Recorder())


async def test_connector_satisfies_the_protocol(fake: FakeDiscord, tmp_path: Path) -> None:
    connector = DiscordConnector(discord_settings(fake), files_dir=tmp_path)
    assert isinstance(connector, Connector)
    assert connector.name == CHANNEL
    assert connector.health.state == "starting"


async def test_reconnects_after_the_gateway_drops_and_gets_missed_messages(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    await fake.disconnect_all()
    missed = fake.inject_message(
        fake.channel_id, "while you were away", author_id=fake.user_id, mention_bot=True
    )

    await fake.wait_for_ready(resumes=1)
    await wait_until(lambda: connector.health.state == "connected", 5.0, "connected again")
    (event,) = await rec.wait_for(1)
    assert event.event_id == missed
    after = fake.inject_message(fake.channel_id, "and now", author_id=fake.user_id, mention_bot=True)
    await rec.wait_for(2)
    assert rec.events[1].event_id == after
    assert len(fake.gateway.identifies) == 1  # resumed, not a new session


async def test_health_reports_reconnecting_while_the_gateway_is_down(start_connector: StartConnector) -> None:
    async with FakeDiscord() as server:
        connector, _ = await start_connector(server=server)
    await wait_until(lambda: connector.health.state == "reconnecting", 5.0, "reconnecting")
    assert "gateway" in connector.health.detail


async def test_undecodable_gateway_frame_restarts_the_connection(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    fake.inject_frame("{this is not json")

    await fake.wait_for_ready(identifies=2, timeout=5.0)
    await wait_until(lambda: connector.health.state == "connected", 5.0, "connected again")
    fake.inject_message(fake.dm_channel_id, "back?", author_id=fake.user_id, guild=False)
    (event,) = await rec.wait_for(1)
    assert event.text == "back?"
    assert len(fake.gateway.connections) == 1


async def test_missing_message_content_intent_fails_with_instructions(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    await fake.disconnect_all(code=4014)
    await wait_until(lambda: connector.health.state == "failed", 5.0, "failed")
    assert "Message Content" in connector.health.detail


async def test_gateway_url_is_discovered_from_the_api(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector(gateway_url=None)
    fake.inject_message(fake.dm_channel_id, "found you", author_id=fake.user_id, guild=False)
    (event,) = await rec.wait_for(1)
    assert event.text == "found you"
    assert fake.gateway.connect_queries[0]["encoding"] == "json"


async def test_two_discord_channels_with_different_endpoints_run_side_by_side(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    async with FakeDiscord(token="second-token") as other:
        first, first_rec = await start_connector()
        second, second_rec = await start_connector(server=other, name="other-discord")
        fake.inject_message(fake.dm_channel_id, "to the first", author_id=fake.user_id, guild=False)
        other.inject_message(other.dm_channel_id, "to the second", author_id=other.user_id, guild=False)

        assert [e.text for e in await first_rec.wait_for(1)] == ["to the first"]
        assert [e.text for e in await second_rec.wait_for(1)] == ["to the second"]
        text = RenderedChunk("pong", "pong", "markdown")
        assert (await first.send(OutboundChunk(1, ThreadKey(CHANNEL, fake.dm_channel_id), text))).ok
        assert (await second.send(OutboundChunk(1, ThreadKey("other-discord", other.dm_channel_id), text))).ok
        assert len(fake.sent(fake.dm_channel_id)) == 1
        assert len(other.sent(other.dm_channel_id)) == 1
        await second.stop()


async def test_stop_is_idempotent_and_ends_delivery(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    await connector.set_working(ThreadKey(CHANNEL, fake.channel_id), True)

    await connector.stop()
    await connector.stop()

    assert connector.health.state == "stopped"
    fake.inject_message(fake.dm_channel_id, "anyone?", author_id=fake.user_id, guild=False)
    result = await connector.send(
        OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), RenderedChunk("x", "x", "markdown"))
    )
    assert result.error_class is ErrorClass.TRANSIENT
    await wait_until(lambda: not fake.gateway.connections, 2.0, "socket closed")
    assert rec.events == []


class _Gate:
    """A cluster role this node may or may not hold yet."""

    def __init__(self) -> None:
        self.ours = asyncio.Event()

    async def wait(self) -> None:
        await self.ours.wait()


async def test_a_node_without_the_gateway_role_sends_and_opens_the_session_once_it_has_it(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    connector = DiscordConnector(discord_settings(fake), files_dir=tmp_path)
    gate = _Gate()
    connector.receive_gates = lambda receiver: gate
    recorder = Recorder()
    await connector.start(recorder)
    try:
        assert connector.single_receiver
        result = await connector.send(
            OutboundChunk(
                1, ThreadKey(CHANNEL, fake.channel_id), RenderedChunk("over REST", "over REST", "markdown")
            )
        )
        assert result.ok, result.error
        assert [m["content"] for m in fake.sent(fake.channel_id)] == ["over REST"]
        await asyncio.sleep(0.3)
        assert fake.gateway.identifies == []  # another node's session receives meanwhile
        assert connector.health.state == "connected"

        gate.ours.set()
        await fake.wait_for_ready(identifies=1)
        fake.inject_message(fake.channel_id, "now ours", author_id="111", mention_bot=True)
        events = await recorder.wait_for(1)
        assert ["now ours" in e.text for e in events] == [True]
        assert len(fake.gateway.identifies) == 1
    finally:
        await connector.stop()
