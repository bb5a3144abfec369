"""A Discord bot split over shards: one gateway session per shard, started in Discord's pace,
and in a cluster each shard received by the node that holds its role."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from connectors.base import OutboundChunk, RenderedChunk, ThreadKey
from connectors.discord_bot import DiscordConnector
from tests.fakes.discord_api import FakeDiscord
from tests.integration.discord.conftest import CHANNEL, Recorder, discord_settings, wait_until


def _shards(fake: FakeDiscord) -> list[list[int] | None]:
    return [identify.get("shard") for identify in fake.gateway.identifies]


async def test_each_shard_has_its_own_session_and_receives_its_guilds(tmp_path: Path) -> None:
    async with FakeDiscord(max_concurrency=16) as fake:
        guilds = [fake.add_guild(shard, 3) for shard in range(3)]
        connector = DiscordConnector(discord_settings(fake, shard_count=3), files_dir=tmp_path)
        recorder = Recorder()
        await connector.start(recorder)
        try:
            await fake.wait_for_ready(identifies=3)
            await wait_until(lambda: connector.health.state == "connected", 5.0, "connected")
            assert sorted(_shards(fake)) == [[0, 3], [1, 3], [2, 3]]  # type: ignore[type-var]
            for n, (_, channel) in enumerate(guilds):
                fake.inject_message(channel, f"to guild {n}", author_id=fake.user_id, mention_bot=True)
            fake.inject_message(fake.dm_channel_id, "a DM", author_id=fake.user_id, guild=False)

            events = await recorder.wait_for(4)
            await asyncio.sleep(0.2)  # a second session of a shard would deliver again by now
            texts = sorted(e.text.split("> ")[-1] for e in recorder.events)
            assert texts == ["a DM", "to guild 0", "to guild 1", "to guild 2"]
            assert {e.thread_key.chat_id for e in events} == {c for _, c in guilds} | {fake.dm_channel_id}

            # Replies go over REST whichever shard the message came on.
            text = RenderedChunk("pong", "pong", "markdown")
            for _, channel in guilds:
                assert (await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, channel), text))).ok
                assert [m["content"] for m in fake.sent(channel)] == ["pong"]
        finally:
            await connector.stop()
        await wait_until(lambda: not fake.gateway.connections, 2.0, "every session closed")


async def test_shards_identify_one_per_interval_in_a_bucket(tmp_path: Path) -> None:
    # Discord answers an IDENTIFY that comes too soon after its bucket's last with an
    # invalid session; the fake does the same and counts them. The connector's interval
    # exceeds the limit, as its default does Discord's, for the way an IDENTIFY takes.
    async with FakeDiscord(max_concurrency=1, identify_interval=0.3) as fake:
        connector = DiscordConnector(
            discord_settings(fake, shard_count=3), files_dir=tmp_path, identify_interval=0.4
        )
        await connector.start(Recorder())
        try:
            await fake.wait_for_ready(identifies=3, timeout=10.0)
            await wait_until(lambda: connector.health.state == "connected", 5.0, "connected")
            assert fake.gateway.early_identifies == 0
            assert sorted(_shards(fake)) == [[0, 3], [1, 3], [2, 3]]  # type: ignore[type-var]
        finally:
            await connector.stop()


class _Gates:
    """A cluster node's receiver roles, each of which it may or may not hold yet."""

    def __init__(self) -> None:
        self.ours: dict[str, asyncio.Event] = {}

    def __call__(self, receiver: str) -> _Gates.Gate:
        return self.Gate(self.ours.setdefault(receiver, asyncio.Event()))

    class Gate:
        def __init__(self, event: asyncio.Event) -> None:
            self.event = event

        async def wait(self) -> None:
            await self.event.wait()


async def test_a_node_receives_only_the_shards_whose_roles_it_holds(tmp_path: Path) -> None:
    async with FakeDiscord(max_concurrency=16) as fake:
        (_, first), (_, second) = fake.add_guild(0, 2), fake.add_guild(1, 2)
        connector = DiscordConnector(discord_settings(fake, shard_count=2), files_dir=tmp_path)
        gates = _Gates()
        connector.receive_gates = gates
        recorder = Recorder()
        await connector.start(recorder)
        try:
            assert sorted(gates.ours) == ["shard-0-of-2", "shard-1-of-2"]
            assert connector.health.state == "connected"
            assert "on another node" in connector.health.detail

            gates.ours["shard-1-of-2"].set()
            await fake.wait_for_ready(identifies=1)
            await wait_until(lambda: "shards 1 here" in connector.health.detail, 5.0, "shard 1 connected")
            assert _shards(fake) == [[1, 2]]
            fake.inject_message(second, "on shard 1", author_id=fake.user_id, mention_bot=True)
            fake.inject_message(first, "on shard 0", author_id=fake.user_id, mention_bot=True)
            await recorder.wait_for(1)
            await asyncio.sleep(0.2)
            assert [e.thread_key.chat_id for e in recorder.events] == [second]  # shard 0 is another node's

            # The node holding shard 0 is lost: this node takes the role over.
            gates.ours["shard-0-of-2"].set()
            await fake.wait_for_ready(identifies=2)
            await wait_until(lambda: connector.health.detail == "", 5.0, "both shards here")
            fake.inject_message(first, "shard 0 again", author_id=fake.user_id, mention_bot=True)
            await wait_until(
                lambda: any("shard 0 again" in e.text for e in recorder.events), 5.0, "shard 0's message"
            )
        finally:
            await connector.stop()


async def test_a_bot_with_more_guilds_than_its_shards_hold_is_told_to_raise_shard_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="talon.connectors.discord")
    async with FakeDiscord(shards=4, max_concurrency=16) as fake:
        connector = DiscordConnector(discord_settings(fake, shard_count=2), files_dir=tmp_path)
        await connector.start(Recorder())
        try:
            await fake.wait_for_ready(identifies=2)
        finally:
            await connector.stop()
    assert "Discord recommends 4 shards and shard_count is 2" in caplog.text


async def test_a_shard_refused_by_the_gateway_fails_the_channel_with_the_fix(tmp_path: Path) -> None:
    async with FakeDiscord(max_concurrency=16) as fake:
        connector = DiscordConnector(discord_settings(fake, shard_count=2), files_dir=tmp_path)
        await connector.start(Recorder())
        try:
            await fake.wait_for_ready(identifies=2)
            await wait_until(lambda: connector.health.state == "connected", 5.0, "connected")
            await fake.disconnect_all(code=4011)
            await wait_until(lambda: connector.health.state == "failed", 5.0, "failed")
            assert "shard_count" in connector.health.detail and "shard " in connector.health.detail
        finally:
            await connector.stop()


async def test_two_nodes_starting_shards_at_once_are_refused_once_and_both_come_up(tmp_path: Path) -> None:
    # Each node paces its own starts; two nodes taking shards of one bucket at once send
    # their IDENTIFYs together, Discord refuses one, and that node tries again in its turn.
    async with FakeDiscord(max_concurrency=1, identify_interval=0.5) as fake:
        (_, first), (_, second) = fake.add_guild(0, 2), fake.add_guild(1, 2)
        nodes, recorders = [], []
        for shard in (0, 1):
            connector = DiscordConnector(
                discord_settings(fake, shard_count=2), files_dir=tmp_path / str(shard), identify_interval=0.6
            )
            gates = _Gates()
            gates(f"shard-{shard}-of-2").event.set()  # this node holds one shard only
            connector.receive_gates = gates
            recorders.append(Recorder())
            nodes.append(connector)
        try:
            await asyncio.gather(*(node.start(rec) for node, rec in zip(nodes, recorders, strict=True)))
            await fake.wait_for_ready(identifies=2, timeout=10.0)
            assert fake.gateway.early_identifies >= 1
            assert sorted(_shards(fake)) == [[0, 2], [1, 2]]  # type: ignore[type-var]
            for node in nodes:
                await wait_until(lambda node=node: node.health.state == "connected", 5.0, "connected")
            fake.inject_message(first, "to shard 0", author_id=fake.user_id, mention_bot=True)
            fake.inject_message(second, "to shard 1", author_id=fake.user_id, mention_bot=True)
            for recorder, channel in zip(recorders, (first, second), strict=True):
                (event,) = await recorder.wait_for(1)
                assert event.thread_key.chat_id == channel
        finally:
            await asyncio.gather(*(node.stop() for node in nodes))
