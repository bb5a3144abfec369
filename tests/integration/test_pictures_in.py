"""Pictures users send reach the model: a Telegram photo, a Slack image file and a Discord
image attachment arrive in the fake model's request as image content beside the text that
names their workspace path; a model that takes no images is told where the picture is."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI, Reply
from tests.fakes.png_maker import make_png
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, write_config

CHANNEL = "team"
WAIT = 30.0
PNG = make_png(8, 6)
_NO_PACING = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}


def user_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every content block of the request's user messages (Messages API shape)."""
    blocks: list[dict[str, Any]] = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            blocks.extend(content if isinstance(content, list) else [{"type": "text", "text": content}])
    return blocks


@asynccontextmanager
async def _platform(name: str) -> AsyncIterator[Any]:
    if name == "telegram":
        async with FakeTelegramAPI() as fake:
            yield fake
    elif name == "slack":
        async with FakeSlack() as fake:
            yield fake
    else:
        async with FakeDiscord() as fake:
            yield fake


def _channel(name: str, fake: Any) -> dict[str, Any]:
    if name == "telegram":
        return {"type": "telegram", "token": fake.token, "api_base_url": fake.url, "pacing": _NO_PACING}
    if name == "slack":
        return {
            "type": "slack",
            "bot_token": fake.bot_token,
            "app_token": fake.app_token,
            "api_base_url": fake.base_url,
            "pacing": _NO_PACING,
        }
    return {
        "type": "discord",
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
    }


async def _send_picture(name: str, fake: Any, text: str, picture: bytes) -> None:
    if name == "telegram":
        fake.inject_message(4242, text, user_id=4242, photo=picture)
    elif name == "slack":
        await fake.wait_for_connections(1, timeout=WAIT)
        meta = fake.add_file("chart.png", picture, mimetype="image/png")
        await fake.inject_message("D0DIRECT1", text, channel_type="im", files=[meta])
    else:
        await fake.wait_for_ready(timeout=WAIT)
        upload = fake.add_file("chart.png", picture, content_type="image/png")
        fake.inject_message(
            fake.channel_id, text, author_id=fake.user_id, mention_bot=True, attachments=[upload]
        )


async def _replies(name: str, fake: Any) -> list[str]:
    if name == "telegram":
        return [m.text for m in await fake.wait_for_sent(4242, 1, timeout=WAIT)]
    if name == "slack":
        return [m.text for m in await fake.wait_for_posted("D0DIRECT1", 1, timeout=WAIT)]
    return [m["content"] for m in await fake.wait_for_sent(fake.channel_id, 1, timeout=WAIT)]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_picture_a_user_sends_reaches_the_model_as_image_content(
    platform: str, tmp_path: Path
) -> None:
    async with (
        _platform(platform) as fake,
        FakeAnthropic(responder=lambda body: Reply(text="a red box")) as model,
    ):
        config = write_config(
            tmp_path,
            provider=provider_for(model),
            extra={
                "channels": [{"name": CHANNEL, **_channel(platform, fake)}],
                "bindings": [{"channel": CHANNEL, "persona": "assistant"}],
            },
        )
        async with running_gateway(config):
            await _send_picture(platform, fake, "what is in this picture?", PNG)
            replies = await _replies(platform, fake)
    assert replies == ["a red box"]
    (request,) = model.requests
    blocks = user_blocks(request)
    images = [b for b in blocks if b["type"] == "image"]
    assert [(i["source"]["media_type"], base64.b64decode(i["source"]["data"])) for i in images] == [
        ("image/png", PNG)
    ]
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
    assert "what is in this picture?" in text
    shown = re.search(r"\[image at (/workspace/inbox/\d+/[^ ]+) \(8x6 PNG\), shown below\]", text)
    assert shown is not None, text
    workspace = tmp_path / "data" / "workspaces" / "assistant" / "threads" / "1"
    assert (workspace / shown.group(1).removeprefix("/workspace/")).read_bytes() == PNG


async def test_a_model_without_vision_is_told_where_the_picture_is(tmp_path: Path) -> None:
    async with (
        FakeTelegramAPI() as telegram,
        FakeOpenAI(responder=lambda body: Reply(text="I cannot see it")) as model,
    ):
        provider = {**provider_for(model, "openai"), "text_only_models": ["test-model"]}
        config = write_config(
            tmp_path,
            provider=provider,
            extra={
                "channels": [{"name": CHANNEL, **_channel("telegram", telegram)}],
                "bindings": [{"channel": CHANNEL, "persona": "assistant"}],
            },
        )
        async with running_gateway(config):
            telegram.inject_message(4242, "look", user_id=4242, photo=PNG)
            await telegram.wait_for_sent(4242, 1, timeout=WAIT)
    (request,) = model.requests
    users = [m for m in request["messages"] if m["role"] == "user"]
    assert all(isinstance(m["content"], str) for m in users)  # no image parts at all
    text = "\n".join(m["content"] for m in users)
    assert re.search(
        r"\[the user sent an image at /workspace/inbox/\d+/photo_\w+\.jpg; this model cannot see images", text
    ), text


async def test_an_openai_compatible_model_gets_the_picture_as_an_image_url_part(tmp_path: Path) -> None:
    async with FakeTelegramAPI() as telegram, FakeOpenAI(responder=lambda body: Reply(text="red")) as model:
        config = write_config(
            tmp_path,
            provider=provider_for(model, "openai"),
            extra={
                "channels": [{"name": CHANNEL, **_channel("telegram", telegram)}],
                "bindings": [{"channel": CHANNEL, "persona": "assistant"}],
            },
        )
        async with running_gateway(config):
            telegram.inject_message(4242, "colour?", user_id=4242, photo=PNG)
            await telegram.wait_for_sent(4242, 1, timeout=WAIT)
    (request,) = model.requests
    [user] = [m for m in request["messages"] if m["role"] == "user"]
    kinds = [part["type"] for part in user["content"]]
    assert kinds == ["text", "image_url"]
    url = user["content"][1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.mark.parametrize("chat_type", ["private", "supergroup"])
async def test_a_telegram_album_of_three_photos_is_answered_once_with_all_three(
    chat_type: str, tmp_path: Path
) -> None:
    chat = 4242 if chat_type == "private" else -100777
    photos = [make_png(2 + i, 2) for i in range(3)]
    async with (
        FakeTelegramAPI() as telegram,
        FakeAnthropic(responder=lambda body: Reply(text="three")) as model,
    ):
        config = write_config(
            tmp_path,
            provider=provider_for(model),
            extra={
                "channels": [{"name": CHANNEL, **_channel("telegram", telegram)}],
                "bindings": [{"channel": CHANNEL, "persona": "assistant"}],
            },
        )
        async with running_gateway(config):
            for i, photo in enumerate(photos):
                # The caption (addressing the bot in a group) is on the first photo only, as Telegram sends it.
                caption = (
                    ("@talon_test_bot " if chat_type != "private" else "") + "compare these" if i == 0 else ""
                )
                telegram.inject_message(
                    chat, caption, user_id=4242, chat_type=chat_type, photo=photo, media_group_id="album-1"
                )
            replies = await telegram.wait_for_sent(chat, 1, timeout=WAIT)
            await asyncio.sleep(2.0)  # a second turn would have answered by now
            replies = telegram.sent_messages(chat)
    assert [m.text for m in replies] == ["three"]
    (request,) = model.requests
    images = [base64.b64decode(b["source"]["data"]) for b in user_blocks(request) if b["type"] == "image"]
    assert images == photos
