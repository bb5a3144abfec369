"""The fake Discord's interactions, driven through discord.py's own client: a tap arrives as
INTERACTION_CREATE, the callback updates the message once, followups and @original work."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import discord
import pytest
from discord.http import Route

from connectors.discord_bot.client import TalonDiscordClient, api_base_for
from tests.fakes.discord_api import FakeDiscord


@contextlib.asynccontextmanager
async def connected(
    fake: FakeDiscord,
) -> AsyncIterator[tuple[TalonDiscordClient, asyncio.Queue[discord.Interaction]]]:
    client = TalonDiscordClient(
        on_message=lambda message, raw: None,
        on_state=lambda state, detail: None,
        api_base=api_base_for(fake.api_base_url),
        gateway_url=fake.gateway_url,
    )
    seen: asyncio.Queue[discord.Interaction] = asyncio.Queue()

    async def on_interaction(interaction: discord.Interaction) -> None:
        await seen.put(interaction)

    client.on_interaction = on_interaction  # type: ignore[attr-defined]
    await client.login(fake.token)
    task = asyncio.create_task(client.connect(reconnect=False))
    try:
        await fake.wait_for_ready()
        yield client, seen
    finally:
        await client.close()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def post_buttons(client: TalonDiscordClient, channel_id: str) -> str:
    buttons = {"type": 1, "components": [{"type": 2, "style": 1, "label": "Yes", "custom_id": "q:1"}]}
    route = Route("POST", "/channels/{channel_id}/messages", channel_id=channel_id)
    message = await client.http.request(route, json={"content": "Deploy?", "components": [buttons]})
    return str(message["id"])


async def callback(client: TalonDiscordClient, interaction: discord.Interaction, body: dict) -> dict:
    route = Route(
        "POST",
        "/interactions/{interaction_id}/{token}/callback",
        interaction_id=interaction.id,
        token=interaction.token,
    )
    return await client.http.request(route, json=body, params={"with_response": "1"})


async def test_a_tap_is_answered_once_and_updates_the_message() -> None:
    async with FakeDiscord() as fake, connected(fake) as (client, seen):
        mid = await post_buttons(client, fake.channel_id)
        assert fake.sent(fake.channel_id)[0]["components"][0]["components"][0]["custom_id"] == "q:1"
        tap = fake.interactions.tap(mid, "q:1", user_id=fake.user_id)
        interaction = await asyncio.wait_for(seen.get(), 5)
        assert interaction.type is discord.InteractionType.component
        assert interaction.data == {"custom_id": "q:1", "component_type": 2}
        assert interaction.user.id == int(fake.user_id)
        assert interaction.message is not None and interaction.message.id == int(mid)

        answer = await callback(
            client, interaction, {"type": 7, "data": {"content": "Deploy? Yes", "components": []}}
        )
        assert answer["interaction"]["id"] == tap.id
        assert fake.interactions.components(mid) == []
        with pytest.raises(discord.HTTPException) as refused:
            await callback(client, interaction, {"type": 6})
        assert refused.value.code == 40060
        assert tap.refused_callbacks == 1


async def test_unknown_interaction_and_select_values() -> None:
    async with FakeDiscord() as fake, connected(fake) as (client, seen):
        mid = await post_buttons(client, fake.channel_id)
        fake.interactions.tap(mid, "q:sel", user_id=fake.user_id, values=["b", "c"])
        interaction = await asyncio.wait_for(seen.get(), 5)
        assert interaction.data == {"custom_id": "q:sel", "component_type": 3, "values": ["b", "c"]}
        route = Route("POST", "/interactions/{iid}/{token}/callback", iid=interaction.id, token="wrong")
        with pytest.raises(discord.NotFound) as unknown:
            await client.http.request(route, json={"type": 6})
        assert unknown.value.code == 10062


async def test_deferred_reply_then_original_and_followups() -> None:
    async with FakeDiscord() as fake, connected(fake) as (client, seen):
        record = fake.interactions.inject(
            2, {"id": "1", "name": "help", "type": 1}, channel_id=fake.channel_id, user_id=fake.user_id
        )
        interaction = await asyncio.wait_for(seen.get(), 5)
        assert interaction.type is discord.InteractionType.application_command
        await callback(client, interaction, {"type": 5})
        app = fake.bot_id
        original = Route("PATCH", "/webhooks/{app}/{token}/messages/@original", app=app, token=record.token)
        edited = await client.http.request(original, json={"content": "Commands: /stop /new"})
        assert edited["content"] == "Commands: /stop /new"
        got = await client.http.request(
            Route("GET", "/webhooks/{app}/{token}/messages/@original", app=app, token=record.token)
        )
        assert got["id"] == edited["id"]
        followup = await client.http.request(
            Route("POST", "/webhooks/{app}/{token}", app=app, token=record.token), json={"content": "more"}
        )
        assert [m["content"] for m in fake.sent(fake.channel_id)] == ["Commands: /stop /new", "more"]
        assert record.followups == [followup["id"]]
