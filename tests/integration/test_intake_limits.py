"""Intake limits as a Telegram user meets them: a huge message reaches the model cut, with
the full text attached; a flood from one group member is answered in a few turns, with one
slow-down notice, and nothing is lost.

The real gateway and python-telegram-bot run against the fake Bot API and the fake model API.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

# The daemon imports the model SDK in the background on first use; importing it with the
# tests keeps that out of their reply timeouts.
import gateway.runtime.providers.anthropic_provider  # noqa: F401
from gateway.daemon import Gateway
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, write_config
from tests.store_helpers import fetch_row, fetch_rows

CHANNEL = "team-telegram"
USER = 4242
GROUP = -1001234567890
NOTICE = "faster than I can answer"
# Replies are not paced here: the tests are about intake, and pacing would only slow them.
NO_PACING = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}


def answer(body: dict[str, Any]) -> Reply:
    """``seen: <the last line the model was given>``: short, and names what it answers."""
    return Reply(text="seen: " + last_user_text(body).rsplit("\n", 1)[-1])


def persona_runs(model: FakeAnthropic) -> list[dict[str, Any]]:
    """The model requests made for the persona's turns (not for summaries)."""
    return [body for body in model.requests if "You are assistant." in json.dumps(body.get("system", ""))]


def contents(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as server:
        yield server


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=answer) as server:
        yield server


@asynccontextmanager
async def telegram_gateway(
    root: Path, fake: FakeTelegramAPI, model: FakeAnthropic, **channel: Any
) -> AsyncIterator[Gateway]:
    settings = {
        "name": CHANNEL,
        "type": "telegram",
        "token": fake.token,
        "api_base_url": fake.url,
        "pacing": NO_PACING,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        extra={"channels": [settings], "bindings": [{"channel": CHANNEL, "persona": "assistant"}]},
    )
    async with running_gateway(config) as gw:
        yield gw


async def wait_for_text(fake: FakeTelegramAPI, chat: int, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(needle in m.text for m in fake.sent_messages(chat)):
        if time.monotonic() > deadline:
            sent = [m.text[:80] for m in fake.sent_messages(chat)]
            raise AssertionError(f"no reply containing {needle!r}; sent: {sent}")
        await asyncio.sleep(0.05)


async def test_a_5_mb_message_reaches_the_model_cut_with_the_full_text_attached(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    original = "".join(f"line {i:07d} of a very long paste\n" for i in range(160_000))
    assert len(original) > 5_000_000
    async with telegram_gateway(tmp_path, fake, model) as gw:
        fake.inject_message(USER, original, user_id=USER, first_name="Ada")
        (reply,) = await fake.wait_for_sent(USER, 1, timeout=30)

        (row,) = await fetch_rows(
            gw.components.db, "SELECT id, thread_id, text, attachments FROM messages WHERE role = 'user'"
        )

    (request,) = persona_runs(model)
    seen = last_user_text(request)
    assert original[:20_000] in seen
    assert original[:20_001] not in seen
    assert len(seen) < 20_500
    [attachment] = json.loads(row["attachments"])
    assert f"The full text is attached as {attachment['name']}" in seen
    # In the thread's workspace, where read_file finds it, and the only copy.
    assert attachment["path"] == f"/workspace/inbox/{row['id']}/{attachment['name']}"
    workspace = tmp_path / "data" / "workspaces" / "assistant" / "threads" / str(row["thread_id"])
    assert contents(str(workspace / "inbox" / str(row["id"]) / attachment["name"])) == original
    staging = tmp_path / "data" / "files" / CHANNEL / str(USER)
    assert list(staging.iterdir()) == []
    assert seen.startswith(row["text"])
    assert attachment["path"] in seen  # the model is told where the full text is
    assert reply.text.startswith("seen: ")


async def test_a_flood_from_one_group_member_is_answered_at_the_rate_with_one_notice(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    per_user, window = 10, 8.0
    async with telegram_gateway(
        tmp_path, fake, model, require_mention=False, rate_limit={"per_user": per_user, "window": window}
    ) as gw:
        started = time.monotonic()
        for i in range(1000):
            fake.inject_message(GROUP, f"message {i}", user_id=USER, chat_type="supergroup", first_name="Ada")
        while (await fetch_row(gw.components.db, "SELECT COUNT(*) AS n FROM messages WHERE role = 'user'"))[
            "n"
        ] < 1000:
            assert time.monotonic() - started < window, "intake too slow for this test's window"
            await asyncio.sleep(0.05)

        await wait_for_text(fake, GROUP, "seen: [Ada] message 999", timeout=window + 20)
        await asyncio.sleep(0.5)  # a turn that should not happen would start by now

        stored = (
            await fetch_row(gw.components.db, "SELECT COUNT(*) AS n FROM messages WHERE role = 'user'")
        )["n"]

    assert stored == 1000
    # At most `per_user` prompt messages (fewer turns, as they coalesce), then one turn for the rest.
    assert len(persona_runs(model)) <= per_user + 1
    notices = [m.text for m in fake.sent_messages(GROUP) if NOTICE in m.text]
    assert len(notices) == 1
    assert notices[0].startswith("Ada, you're sending messages faster than I can answer")
    assert "together in about" in notices[0]
