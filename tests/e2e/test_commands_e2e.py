"""Chat commands typed natively on each platform, through a real in-process gateway: the
platform's command registration at start (Telegram's menu, Discord's application commands),
Slack slash commands over Socket Mode and HTTP, Discord application command interactions,
each answered where the user typed it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (see test_telegram_e2e)
from gateway.command_table import CHAT_COMMANDS
from tests.e2e.support import transcript
from tests.e2e.test_telegram_e2e import answer, telegram_gateway
from tests.fakes.model_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.store_helpers import fetch_rows

USER = 4242
GROUP = -1001234567890
REPLY = 10.0


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=answer) as server:
        yield server


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as server:
        yield server


# ---------------------------------------------------------------- Telegram


async def test_telegram_registers_the_menu_and_answers_help_new_and_stop(
    tmp_path, telegram: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    async with telegram_gateway(tmp_path, telegram, model) as gw:
        menu = telegram.command_menus.default()
        # addressed to this bot in a group, and plain in a private chat
        telegram.inject_message(GROUP, "/help@talon_test_bot", user_id=USER, chat_type="supergroup")
        (helped,) = await telegram.wait_for_sent(GROUP, 1, timeout=REPLY)
        telegram.inject_message(USER, "remember 42", user_id=USER)
        await telegram.wait_for_sent(USER, 1, timeout=REPLY)
        telegram.inject_message(USER, "/new", user_id=USER)
        telegram.inject_message(USER, "/stop", user_id=USER)
        telegram.inject_message(USER, "what number?", user_id=USER)
        sent = await telegram.wait_for_sent(USER, 4, timeout=REPLY)
        commands = await fetch_rows(gw.components.db, "SELECT text FROM messages WHERE text LIKE '/%'")

    assert menu == [{"command": c.name, "description": c.summary} for c in CHAT_COMMANDS]
    for command in CHAT_COMMANDS:
        assert f"/{command.name} — {command.summary}" in helped.text
    assert [m.text for m in sent] == [
        "re: remember 42",
        "Started a new conversation.",
        "Nothing is running.",
        "re: what number?",
    ]
    # /new dropped the earlier exchange from the model's context; commands started no turn
    assert len(model.requests) == 2
    assert "remember 42" not in transcript(model.requests[1])
    assert sorted(r["text"] for r in commands) == ["/help", "/new", "/stop"]


async def test_telegram_channel_runs_on_when_the_menu_is_refused(
    tmp_path, telegram: FakeTelegramAPI, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    telegram.fail_next("setMyCommands", 400, "Bad Request: BOT_COMMAND_INVALID")
    with caplog.at_level(logging.WARNING, logger="talon.connectors.telegram"):
        async with telegram_gateway(tmp_path, telegram, model) as gw:
            telegram.inject_message(USER, "/help", user_id=USER)
            (helped,) = await telegram.wait_for_sent(USER, 1, timeout=REPLY)
            state = gw.components.connectors["team-telegram"].health.state
    assert state == "connected"
    assert helped.text.startswith("Commands:")
    assert telegram.command_menus.default() is None
    assert any("could not register the command menu" in r.getMessage() for r in caplog.records)
    assert telegram.token not in caplog.text

