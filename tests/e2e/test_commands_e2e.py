"""Chat commands typed natively on each platform, through a real in-process gateway: the
platform's command registration at start (Telegram's menu, Discord's application commands),
Slack slash commands over Socket Mode and HTTP, Discord application command interactions,
each answered where the user typed it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (see test_telegram_e2e)
from gateway.command_table import CHAT_COMMANDS, help_text
from tests.e2e.support import transcript, wait_until
from tests.e2e.test_discord_e2e import discord_gateway
from tests.e2e.test_slack_e2e import DM, GENERAL, NAME, slack_gateway
from tests.e2e.test_slack_e2e import MODES as SLACK_MODES
from tests.e2e.test_telegram_e2e import answer, telegram_gateway
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_api.interactions import Interaction
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.slack_api import Envelope, FakeSlack
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
        await telegram.wait_for_sent(USER, 4, timeout=REPLY)
        telegram.inject_message(USER, "/usage", user_id=USER)
        sent = await telegram.wait_for_sent(USER, 5, timeout=REPLY)
        commands = await fetch_rows(gw.components.db, "SELECT text FROM messages WHERE text LIKE '/%'")

    assert menu == [{"command": c.name, "description": c.summary} for c in CHAT_COMMANDS]
    for command in CHAT_COMMANDS:
        assert f"/{command.name} — {command.summary}" in helped.text
    assert [m.text for m in sent[:4]] == [
        "re: remember 42",
        "Started a new conversation.",
        "Nothing is running.",
        "re: what number?",
    ]
    assert sent[4].text.startswith("Usage") and "you today" in sent[4].text
    # /new dropped the earlier exchange from the model's context; commands started no turn
    assert len(model.requests) == 2
    assert "remember 42" not in transcript(model.requests[1])
    assert sorted(r["text"] for r in commands) == ["/help", "/new", "/stop", "/usage"]


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


# ---------------------------------------------------------------- Slack


async def _slack_reply(slack: FakeSlack, envelope: Envelope) -> dict[str, Any]:
    """What Slack showed the user who typed the command: the acknowledgement's payload."""
    await slack.wait_until(lambda: envelope.acked, REPLY, "the command's acknowledgement")
    assert isinstance(envelope.response, dict), envelope.response
    return envelope.response


@pytest.mark.parametrize("mode", SLACK_MODES)
async def test_slack_slash_commands_steer_the_users_thread_and_answer_only_them(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    slow = FakeAnthropic(responder=lambda body: Reply(text="too late", delay=5))
    async with slow as model, FakeSlack() as slack, slack_gateway(tmp_path, model, slack, mode) as gw:
        # Ada asks in a channel (a thread opens under her message); /stop in the channel stops it
        asked = await slack.inject_message(GENERAL, "write a novel", channel_type="channel", mention=True)
        await wait_until(lambda: len(model.requests) >= 1, REPLY, "the model call")
        stopping = await _slack_reply(slack, await slack.slash_command("/stop", channel=GENERAL))
        (stopped,) = await slack.wait_for_posted(GENERAL, 1, timeout=REPLY)

        # in the DM: /help, and /new through one app-wide command with the name as its first word
        helped = await _slack_reply(slack, await slack.slash_command("/help", channel=DM))
        renewed = await _slack_reply(slack, await slack.slash_command("/talon", "new", channel=DM))
        idle = await _slack_reply(slack, await slack.slash_command("/stop", channel=DM))
        usage = await _slack_reply(slack, await slack.slash_command("/usage", channel=DM))
        unknown = await _slack_reply(slack, await slack.slash_command("/talon", "dance", channel=DM))

        # malformed payloads are logged and skipped: acknowledged, nothing stored
        with caplog.at_level(logging.WARNING, logger="talon.slack"):
            broken = await slack.send_slash_payload({"command": "/stop", "channel_id": DM})
            await slack.wait_until(lambda: broken.acked, REPLY, "the malformed command's acknowledgement")
        await asyncio.sleep(0.2)
        stored = await fetch_rows(
            gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
        )
        threads = await fetch_rows(
            gw.components.db, "SELECT chat_id, topic FROM threads WHERE channel = ?", (NAME,)
        )

    assert stopping == {"text": "Stopping the reply.", "response_type": "ephemeral"}
    assert (stopped.text, stopped.thread_ts) == ("Stopped.", asked)
    assert helped == {"text": help_text(), "response_type": "ephemeral"}
    assert renewed["text"] == "Started a new conversation."
    assert idle["text"] == "Nothing is running."
    assert usage["text"].startswith("Usage") and "you today" in usage["text"]
    assert "/talon dance is not a command here." in unknown["text"] and "/stop" in unknown["text"]
    # the answers were only the acknowledgements: nothing was posted into the DM
    assert slack.posted(DM) == []
    assert len(model.requests) == 1
    assert [r["text"] for r in stored] == [
        "@talon write a novel",
        "/stop",
        "/help",
        "/new",
        "/stop",
        "/usage",
    ]
    # one thread each: Ada's channel thread (no new one for the channel) and the DM
    assert sorted((r["chat_id"], r["topic"] or None) for r in threads) == [(GENERAL, asked), (DM, None)]
    assert any("skipped slack slash command" in r.getMessage() for r in caplog.records)


async def test_slack_new_by_slash_command_starts_a_fresh_context(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    async with FakeSlack() as slack, slack_gateway(tmp_path, model, slack, "socket"):
        await slack.inject_message(DM, "remember 42")
        await slack.wait_for_posted(DM, 1, timeout=REPLY)
        await _slack_reply(slack, await slack.slash_command("/new", channel=DM))
        await slack.inject_message(DM, "what number?")
        await slack.wait_for_posted(DM, 2, timeout=REPLY)
    assert len(model.requests) == 2
    assert "remember 42" not in transcript(model.requests[1])


# ---------------------------------------------------------------- Discord


async def _discord_answer(discord_fake: FakeDiscord, interaction: Interaction) -> str:
    """What the user who typed the command saw: the deferred response, once answered."""

    def answered() -> bool:
        message = discord_fake.interactions.messages.get(interaction.original_id or "")
        return bool(message and message.get("content"))

    await wait_until(answered, REPLY, "the interaction's answer")
    assert interaction.callbacks == [{"type": 5, "data": {"flags": 64}}]  # deferred, ephemeral
    return str(discord_fake.interactions.messages[interaction.original_id]["content"])  # type: ignore[index]


def _app_command(discord_fake: FakeDiscord, name: str, channel_id: str) -> Interaction:
    known = {c.name for c in CHAT_COMMANDS}
    command = discord_fake.app_commands.by_name(name) if name in known else {"id": "1"}
    data = {"id": command["id"], "name": name, "type": 1}
    return discord_fake.interactions.inject(2, data, channel_id=channel_id, user_id=discord_fake.user_id)


async def test_discord_registers_application_commands_and_answers_them_where_typed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slow = FakeAnthropic(responder=lambda body: Reply(text="too late", delay=5))
    async with slow as model, FakeDiscord() as fake, discord_gateway(tmp_path, fake, model) as gw:
        registered = [(c["name"], c["description"]) for c in fake.app_commands.commands]
        # a question in a thread, stopped by /stop typed in that thread
        fake.inject_message(fake.channel_id, "write a novel", author_id=fake.user_id, mention_bot=True)
        await wait_until(lambda: len(model.requests) >= 1, REPLY, "the model call")
        sent_before = len(fake.sent(fake.channel_id))
        stopping = await _discord_answer(fake, _app_command(fake, "stop", fake.channel_id))
        await wait_until(
            lambda: len(fake.sent(fake.channel_id)) > sent_before + 1, REPLY, "the Stopped notice"
        )
        # in the DM and in a thread
        helped = await _discord_answer(fake, _app_command(fake, "help", fake.dm_channel_id))
        renewed = await _discord_answer(fake, _app_command(fake, "new", fake.thread_id))
        usage = await _discord_answer(fake, _app_command(fake, "usage", fake.dm_channel_id))
        unknown = await _discord_answer(fake, _app_command(fake, "dance", fake.dm_channel_id))
        # malformed interactions are logged and skipped: no answer, nothing stored
        with caplog.at_level(logging.WARNING, logger="talon.connectors.discord"):
            nameless = fake.interactions.inject(
                2, {"id": "1", "type": 1}, channel_id=fake.dm_channel_id, user_id=fake.user_id
            )
            fake.inject_dispatch("INTERACTION_CREATE", {"type": 2, "id": "x"})
            await wait_until(lambda: "malformed" in caplog.text, REPLY, "the warnings")
        await asyncio.sleep(0.2)
        stored = await fetch_rows(
            gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
        )
        threads = await fetch_rows(
            gw.components.db, "SELECT chat_id, topic FROM threads WHERE channel = 'team-discord' ORDER BY id"
        )

    assert registered == [(c.name, c.summary) for c in CHAT_COMMANDS]
    assert stopping == "Stopping the reply."
    notices = [m["content"] for m in fake.sent(fake.channel_id)[sent_before:]]
    assert "Stopped." in notices and "too late" not in notices
    assert helped == help_text()
    assert renewed == "Started a new conversation."
    assert usage.startswith("Usage") and "you today" in usage
    assert "/dance is not a command here." in unknown
    assert nameless.callbacks == []
    assert [r["text"] for r in stored] == ["write a novel", "/stop", "/help", "/new", "/usage"]
    # /new in the thread steered the thread, keyed as its messages are (parent channel + thread)
    assert (fake.channel_id, fake.thread_id) in {(r["chat_id"], r["topic"]) for r in threads}


async def test_discord_keeps_other_commands_and_writes_an_unchanged_set_once(
    tmp_path: Path, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeDiscord() as fake:
        fake.app_commands.commands = [{"id": "7", "name": "deploy", "description": "Ship it", "type": 1}]
        async with discord_gateway(tmp_path, fake, model):
            pass
        async with discord_gateway(tmp_path, fake, model):
            pass
        names = sorted(c["name"] for c in fake.app_commands.commands)
        puts = fake.app_commands.puts
        fake.app_commands.commands = []
        fake.app_commands.fail_next_put = 400
        with caplog.at_level(logging.WARNING, logger="talon.connectors.discord"):
            async with discord_gateway(tmp_path, fake, model) as gw:
                fake.inject_message(fake.dm_channel_id, "still here?", author_id=fake.user_id, guild=False)
                (reply,) = await fake.wait_for_sent(fake.dm_channel_id, 1, timeout=REPLY)
                state = gw.components.connectors["team-discord"].health.state
    assert names == sorted(["deploy", *(c.name for c in CHAT_COMMANDS)])
    assert puts == 1
    assert state == "connected" and reply["content"] == "**re:** still here?"
    assert "could not register the application commands" in caplog.text
