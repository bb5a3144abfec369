"""Streamed replies on Discord, end to end: the in-process gateway with the real discord.py
connector between the fake Discord and a model that streams slowly. Discord has no streaming
API, so ``native`` falls back to an edited preview; a reply longer than one message edits the
preview into its first chunk and sends the rest as new messages."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (the SDK import stays out of the timeouts)
from connectors.render import render_markdown
from gateway.daemon import Gateway
from tests.e2e.support import wait_until
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, write_config

CHANNEL = "team-discord"


def slow(text: str, pieces: int = 15, delay: float = 0.1) -> Reply:
    size = max(1, len(text) // pieces)
    return Reply(chunks=[text[i : i + size] for i in range(0, len(text), size)], chunk_delay=delay)


def scripted(*replies: Reply) -> Callable[[dict[str, Any]], Reply]:
    queue = list(replies)
    return lambda body: queue.pop(0) if len(queue) > 1 else queue[0]


@asynccontextmanager
async def discord_gateway(
    root: Path, fake: FakeDiscord, model: FakeAnthropic, **channel: Any
) -> AsyncIterator[Gateway]:
    settings = {
        "name": CHANNEL,
        "type": "discord",
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        extra={"channels": [settings], "bindings": [{"channel": CHANNEL, "persona": "assistant"}]},
    )
    async with running_gateway(config) as gw:
        connector = gw.components.connectors[CHANNEL]
        await wait_until(lambda: connector.health.state == "connected", 5.0, "discord connected")
        yield gw


async def test_a_long_dm_reply_streams_into_a_preview_that_becomes_the_first_chunk_and_the_rest_follow(
    tmp_path: Path,
) -> None:
    long = "**Streaming** on Discord.\n\n" + "\n\n".join(
        f"Part {i}: " + "lorem ipsum " * 30 for i in range(8)
    )
    want = [chunk.text for chunk in render_markdown(long, "discord")]
    assert len(want) >= 2
    async with FakeDiscord() as fake, FakeAnthropic(responder=scripted(slow(long))) as model:
        async with discord_gateway(tmp_path, fake, model, streaming="native"):  # falls back to edit
            fake.inject_message(fake.dm_channel_id, "a long one", author_id=fake.user_id, guild=False)
            await wait_until(
                lambda: [m["content"] for m in fake.visible(fake.dm_channel_id)] == want, 15.0, "the reply"
            )
    first, *rest = fake.visible(fake.dm_channel_id)
    versions = first.get("versions", [])
    assert len(versions) >= 2 and all(v.endswith("writing…") for v in versions)
    assert "\\*\\*Streaming\\*\\*" in versions[-1]  # the preview is plain text, markup escaped
    assert min(b - a for a, b in itertools.pairwise(first["edit_times"])) >= 0.9
    assert all(not m.get("versions") for m in rest)  # extra chunks are new messages
