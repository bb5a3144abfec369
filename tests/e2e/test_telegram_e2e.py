"""Telegram end to end: a real in-process gateway (pipeline, queue, turn runner, outbox and
the Telegram connector on python-telegram-bot) between the fake Bot API and the fake
model API."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

# The daemon imports the model SDK in the background on first use, which takes seconds on
# a busy machine; importing it with the tests keeps that out of their short reply timeouts.
import gateway.runtime.providers.anthropic_provider  # noqa: F401
from gateway.daemon import Gateway
from tests.e2e.support import transcript, wait_until, wait_until_stored
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage, parse_html, utf16_len
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_rows

CHANNEL = "team-telegram"
TELEGRAM_LIMIT = 4096
USER = 4242
GROUP = -1001234567890
FORUM = -1009876543210
BOT = "@talon_test_bot"
REPLY = 10.0  # seconds to wait for an answer; generous for a busy machine


def answer(body: dict[str, Any]) -> Reply:
    """``**re:** <what the last speaker said>``, without the ``[name]`` groups add."""
    said = last_user_text(body).rsplit("\n\n", 1)[-1]
    return Reply(text="**re:** " + re.sub(r"^\[[^\]]+\] ", "", said))


def free_port() -> int:
    # webhook_port must be a real port number (1-65535), so ask the OS for a free one.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def message_id(fake: FakeTelegramAPI, update_id: int) -> int:
    """The message_id of the message an injected update carried."""
    return int(fake.injected(update_id)["message"]["message_id"])


def texts(messages: list[SentMessage]) -> list[str]:
    return [m.text for m in messages]


def utf16_offset(text: str, index: int) -> int:
    return utf16_len(text[:index])


def covered(message: SentMessage, start: int, end: int, entity: Callable[[dict[str, Any]], bool]) -> bool:
    """True when ``message.text[start:end]`` lies inside one entity ``entity`` accepts."""
    lo, hi = utf16_offset(message.text, start), utf16_offset(message.text, end)
    return any(entity(e) and e["offset"] <= lo and hi <= e["offset"] + e["length"] for e in message.entities)


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
    """A gateway with the console and a Telegram channel (``channel`` overrides its
    settings), both bound to ``assistant``."""
    settings = {
        "name": CHANNEL,
        "type": "telegram",
        "token": fake.token,
        "api_base_url": fake.url,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        extra={
            "channels": [{"name": "console", "type": "console"}, settings],
            "bindings": [
                {"channel": "console", "persona": "assistant"},
                {"channel": CHANNEL, "persona": "assistant"},
            ],
        },
    )
    async with running_gateway(config) as gw:
        yield gw


# ---------------------------------------------------------------- conversations


async def test_dm_and_group_mention_are_answered_in_place_and_chatter_is_only_context(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    async with telegram_gateway(tmp_path, fake, model) as gw:
        fake.inject_message(USER, "hello in private", user_id=USER, first_name="Ada")
        fake.inject_message(GROUP, "lunch at noon?", user_id=USER, chat_type="supergroup")
        asked = fake.inject_message(GROUP, f"{BOT} what is planned?", user_id=USER, chat_type="supergroup")

        (dm_reply,) = await fake.wait_for_sent(USER, 1, timeout=REPLY)
        (group_reply,) = await fake.wait_for_sent(GROUP, 1, timeout=REPLY)

        # rendered as Telegram HTML; a private chat needs no quote, a group reply quotes
        assert (dm_reply.text, dm_reply.parse_mode) == ("re: hello in private", "HTML")
        assert dm_reply.entities == [{"type": "bold", "offset": 0, "length": 3}]
        assert dm_reply.reply_to_message_id is None and dm_reply.message_thread_id is None
        assert group_reply.text == f"re: {BOT} what is planned?"
        assert group_reply.entity_types() == {"bold"}
        assert group_reply.reply_to_message_id == message_id(fake, asked)
        assert group_reply.message_thread_id is None

        # the unaddressed message got no turn of its own but is in the group's context
        assert len(model.requests) == 2
        (group_request,) = [r for r in model.requests if "what is planned?" in transcript(r)]
        assert "lunch at noon?" in transcript(group_request)
        assert all("lunch" not in transcript(r) for r in model.requests if r is not group_request)

        # more chatter: stored, not answered; the next mention sees it
        fake.inject_message(GROUP, "pizza instead?", user_id=USER + 1, chat_type="supergroup")
        await wait_until_stored(gw, "pizza instead?")
        await asyncio.sleep(0.3)
        assert len(fake.sent_messages(GROUP)) == 1
        assert len(model.requests) == 2

        fake.inject_message(GROUP, f"{BOT} so what now?", user_id=USER, chat_type="supergroup")
        replies = await fake.wait_for_sent(GROUP, 2, timeout=REPLY)

    assert texts(replies) == [f"re: {BOT} what is planned?", f"re: {BOT} so what now?"]
    assert "pizza instead?" in transcript(model.requests[2])
    assert texts(fake.sent_messages(USER)) == ["re: hello in private"]


async def test_each_forum_topic_is_its_own_thread(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    async with telegram_gateway(tmp_path, fake, model) as gw:
        first = fake.inject_message(
            FORUM,
            f"{BOT} the code word is falcon",
            user_id=USER,
            chat_type="supergroup",
            message_thread_id=77,
        )
        await fake.wait_for_sent(FORUM, 1, timeout=REPLY)
        second = fake.inject_message(
            FORUM, f"{BOT} what is the code word?", user_id=USER, chat_type="supergroup", message_thread_id=78
        )
        await fake.wait_for_sent(FORUM, 2, timeout=REPLY)
        third = fake.inject_message(
            FORUM, f"{BOT} and here?", user_id=USER, chat_type="supergroup", message_thread_id=77
        )
        sent = await fake.wait_for_sent(FORUM, 3, timeout=REPLY)

        threads = await fetch_rows(
            gw.components.db,
            "SELECT chat_id, topic, chat_type FROM threads WHERE channel = ? ORDER BY id",
            (CHANNEL,),
        )

    # each answer lands in the topic it was asked in, quoting the question
    assert [(m.message_thread_id, m.reply_to_message_id) for m in sent] == [
        (77, message_id(fake, first)),
        (78, message_id(fake, second)),
        (77, message_id(fake, third)),
    ]
    assert [tuple(row) for row in threads] == [(str(FORUM), "77", "thread"), (str(FORUM), "78", "thread")]
    # topic 78 never saw topic 77's conversation; topic 77 kept its own
    assert "falcon" not in transcript(model.requests[1])
    assert "falcon" in transcript(model.requests[2])
    assert "what is the code word?" not in transcript(model.requests[2])


async def test_stop_from_the_chat_cancels_a_slow_turn(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    model.script(Reply(text="too late", delay=5))
    async with telegram_gateway(tmp_path, fake, model) as gw:
        fake.inject_message(USER, "write a novel", user_id=USER)
        await wait_until(lambda: len(model.requests) >= 1, REPLY, "the model call")
        fake.inject_message(USER, "/stop", user_id=USER)

        (stopped,) = await fake.wait_for_sent(USER, 1, timeout=REPLY)
        await asyncio.sleep(0.3)
        runs = await fetch_rows(gw.components.db, "SELECT status FROM runs")

    assert stopped.text == "Stopped."
    assert texts(fake.sent_messages(USER)) == ["Stopped."]  # the late answer never arrives
    assert [r["status"] for r in runs] == ["canceled"]
    assert len(model.requests) == 1


async def test_a_chunk_telegram_cannot_parse_is_resent_as_plain_text(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    markdown = "**deploy** finished with `exit 0` & <no> errors"
    model.script(Reply(text=markdown))
    async with telegram_gateway(tmp_path, fake, model) as gw:
        (chunk,) = gw.components.connectors[CHANNEL].render(markdown)
        fake.fail_next(
            "sendMessage",
            400,
            'Bad Request: can\'t parse entities: Unsupported start tag "no" at byte offset 9',
        )
        fake.inject_message(USER, "how did it go?", user_id=USER)
        (fallback,) = await fake.wait_for_sent(USER, 1, timeout=REPLY)

        fake.inject_message(USER, "and now?", user_id=USER)
        later = (await fake.wait_for_sent(USER, 2, timeout=REPLY))[1]

    attempts = fake.calls_to("sendMessage")
    assert [(a.get("parse_mode"), a["text"]) for a in attempts[:2]] == [
        ("HTML", chunk.text),
        (None, chunk.plain),
    ]
    assert fallback.text == "deploy finished with exit 0 & <no> errors"
    assert (fallback.parse_mode, fallback.entities) == (None, [])
    # only that chunk fell back: the next answer is formatted again
    assert (later.parse_mode, later.text, later.entity_types()) == ("HTML", "re: and now?", {"bold"})
    assert len(attempts) == 3


# ---------------------------------------------------------------- long answers

PARTS = 6
LONG_BLOCK = 120  # lines: this code block alone is over Telegram's limit
CODE_LINE = r"code_\d\d_\d\d\d = compute\(\d+, \d+\)  # ✓ <ok> 🚀"
MARKER = re.compile(rf"para\d\d|{CODE_LINE}|cell\d\d")


def long_answer() -> str:
    """Over 10,000 characters: paragraphs, python code blocks (one longer than a message)
    and a table, with characters HTML must escape and ones UTF-16 counts twice; each piece
    carries a marker to check that nothing is lost, repeated or reordered."""
    parts = ["# Release notes 🚀\n"]
    for i in range(PARTS):
        parts.append(f"## Part {i}\n")
        parts.append(f"para{i:02d} " + "The deployment went smoothly & every check passed <ok>. " * 9 + "\n")
        lines = LONG_BLOCK if i == 3 else 10
        code = "".join(f"code_{i:02d}_{n:03d} = compute({i}, {n})  # ✓ <ok> 🚀\n" for n in range(lines))
        parts.append(f"```python\n{code}```\n")
    parts.append(
        "| name | owner | status |\n|---|---|---|\n"
        + "".join(f"| cell{n:02d} | team {n} | green 🚀 |\n" for n in range(30))
    )
    text = "\n".join(parts)
    assert len(text) >= 10_000
    return text


async def test_a_long_answer_arrives_as_valid_chunks_in_order(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    text = long_answer()
    model.script(Reply(text=text, chunks=[text[i : i + 1000] for i in range(0, len(text), 1000)]))
    async with telegram_gateway(tmp_path, fake, model) as gw:
        expected = gw.components.connectors[CHANNEL].render(text)
        asked = fake.inject_message(GROUP, f"{BOT} write the release notes", user_id=USER, chat_type="group")
        await fake.wait_for_sent(GROUP, len(expected), timeout=REPLY)
        await asyncio.sleep(0.2)
        sent = fake.sent_messages(GROUP)

    assert len(sent) >= 4
    assert [m.raw_text for m in sent] == [c.text for c in expected]
    assert len(fake.calls_to("sendMessage")) == len(sent)  # every chunk accepted first time
    assert all(m.parse_mode == "HTML" for m in sent)
    for m in sent:
        assert utf16_len(m.raw_text) <= TELEGRAM_LIMIT  # the HTML source, not only what shows
        assert parse_html(m.raw_text)[0] == m.text  # tags balanced: it parses on its own
    # the first chunk quotes the question, the rest follow it
    assert sent[0].reply_to_message_id == message_id(fake, asked)
    assert [m.reply_to_message_id for m in sent[1:]] == [None] * (len(sent) - 1)

    # nothing lost, nothing repeated, nothing out of order
    found = [(m, hit) for m in sent for hit in MARKER.finditer(m.text)]
    assert [hit.group(0) for _, hit in found] == MARKER.findall(text)
    assert len(found) == PARTS + (PARTS - 1) * 10 + LONG_BLOCK + 30

    def python(e: dict[str, Any]) -> bool:
        return e["type"] == "code" and e.get("language") == "python"

    # every code line is inside a python code block, also after the long block was split
    code_lines = [(m, hit) for m, hit in found if hit.group(0).startswith("code_")]
    assert all(covered(m, hit.start(), hit.end(), python) for m, hit in code_lines)
    split_block = {id(m) for m, hit in code_lines if hit.group(0).startswith("code_03_")}
    assert len(split_block) >= 2
    assert sum(python(e) for m in sent for e in m.entities) > PARTS
    # the table is preformatted so its columns line up
    cells = [(m, hit) for m, hit in found if hit.group(0).startswith("cell")]
    assert all(covered(m, hit.start(), hit.end(), lambda e: e["type"] == "pre") for m, hit in cells)


# ---------------------------------------------------------------- flood control


async def test_flood_control_delays_the_reply_once_without_duplicate(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    async with telegram_gateway(tmp_path, fake, model) as gw:
        fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
        fake.inject_message(USER, "quick question", user_id=USER)

        (reply,) = await fake.wait_for_sent(USER, 1, timeout=REPLY)
        await asyncio.sleep(0.3)
        status = await gw.components.status.report()

    refused_at, accepted_at = fake.call_times_of("sendMessage")
    assert reply.sent_at - refused_at >= 0.99  # Telegram's retry_after, not the 0.05 s backoff
    assert accepted_at - refused_at >= 0.99
    assert texts(fake.sent_messages(USER)) == ["re: quick question"]
    assert len(model.requests) == 1
    assert status.outbox == {} and status.channels[CHANNEL].state == "connected"


# ---------------------------------------------------------------- redelivery


async def test_an_update_redelivered_after_a_restart_is_answered_once(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    """Long polling: the bot stopped before its next ``getUpdates`` told Telegram the new
    offset, so Telegram delivers the committed update again after the restart."""
    async with telegram_gateway(tmp_path, fake, model):
        update = fake.inject_message(USER, "count me once", user_id=USER)
        await fake.wait_for_sent(USER, 1, timeout=REPLY)
    fake.redeliver(update)

    async with telegram_gateway(tmp_path, fake, model) as gw:
        await wait_until(lambda: not fake.pending_update_ids(), 5.0, "the copy to be acknowledged")
        fake.inject_message(USER, "and this one", user_id=USER)
        await fake.wait_for_sent(USER, 2, timeout=REPLY)
        await asyncio.sleep(0.3)

        users = await fetch_rows(
            gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
        )
        copies = await fetch_rows(
            gw.components.db, "SELECT event_id FROM inbox_dedupe WHERE event_id = ?", (str(update),)
        )

    assert texts(fake.sent_messages(USER)) == ["re: count me once", "re: and this one"]
    assert len(model.requests) == 2
    assert [r["text"] for r in users] == ["count me once", "and this one"]
    assert len(copies) == 1


async def test_a_webhook_update_posted_again_is_answered_once(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    """Webhook: the gateway's 200 got lost, so Telegram posts the same update again."""
    port = free_port()
    webhook = {
        "webhook_url": f"http://127.0.0.1:{port}/telegram/hook",
        "webhook_secret": "e2e-secret_0123",
        "webhook_port": port,
    }
    async with telegram_gateway(tmp_path, fake, model, **webhook) as gw:
        update = fake.inject_message(USER, "count me once", user_id=USER)
        await fake.wait_for_sent(USER, 1, timeout=REPLY)
        fake.redeliver(update)
        await wait_until(lambda: fake.webhook_attempts.count((update, 200)) == 2, 5.0, "the second post")
        fake.inject_message(USER, "and this one", user_id=USER)
        await fake.wait_for_sent(USER, 2, timeout=REPLY)
        await asyncio.sleep(0.3)

        users = await fetch_rows(
            gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
        )

    assert fake.calls_to("getUpdates") == []  # it really ran on the webhook
    assert texts(fake.sent_messages(USER)) == ["re: count me once", "re: and this one"]
    assert len(model.requests) == 2
    assert [r["text"] for r in users] == ["count me once", "and this one"]


# ---------------------------------------------------------------- access control


async def test_an_unauthorized_user_gets_nothing_and_nothing_is_stored(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="talon.policy")

    def refusals() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "talon.policy" and r.getMessage() == "refused inbound message"
        ]

    allowed = 777
    async with telegram_gateway(tmp_path, fake, model, allowed_users=[allowed]) as gw:
        fake.inject_message(USER, "let me in", user_id=USER)
        fake.inject_message(GROUP, f"{BOT} hey bot", user_id=USER, chat_type="supergroup")
        await wait_until(lambda: len(refusals()) >= 2, 5.0, "two refusals")
        await wait_until(lambda: not fake.pending_update_ids(), 5.0, "both updates acknowledged")
        await asyncio.sleep(0.3)

        messages = await fetch_rows(gw.components.db, "SELECT id FROM messages")
        threads = await fetch_rows(gw.components.db, "SELECT id FROM threads")
        events = await fetch_rows(gw.components.db, "SELECT event_id FROM inbox_dedupe")

        # the channel itself works: the allowed user is answered
        fake.inject_message(allowed, "it's me", user_id=allowed)
        await fake.wait_for_sent(allowed, 1, timeout=REPLY)

    assert messages == [] and threads == [] and events == []
    assert fake.sent_messages(USER) == [] and fake.sent_messages(GROUP) == []
    assert fake.chat_actions(USER) == [] and fake.chat_actions(GROUP) == []
    assert [last_user_text(r) for r in model.requests] == ["it's me"]
    assert [(r.channel, r.sender, r.chat, r.why) for r in refusals()] == [  # type: ignore[attr-defined]
        (CHANNEL, str(USER), str(USER), "user not in allowed_users"),
        (CHANNEL, str(USER), str(GROUP), "user not in allowed_users"),
    ]
    assert "let me in" not in caplog.text and "hey bot" not in caplog.text


# ---------------------------------------------------------------- typing indicator

TYPING_INTERVAL = 0.1


async def test_typing_is_shown_while_the_model_is_slow_and_stops_after(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    model.script(Reply(text="done thinking", delay=1.0))
    async with telegram_gateway(tmp_path, fake, model, typing_interval=TYPING_INTERVAL):
        fake.inject_message(
            FORUM, f"{BOT} think hard", user_id=USER, chat_type="supergroup", message_thread_id=77
        )

        # shown and kept alive while the model is still thinking
        await wait_until(lambda: len(fake.chat_actions(FORUM)) >= 3, REPLY, "three typing actions")
        assert fake.sent_messages(FORUM) == []
        (reply,) = await fake.wait_for_sent(FORUM, 1, timeout=REPLY)
        await asyncio.sleep(0.05)  # an action already on the wire may still land
        after_reply = len(fake.chat_actions(FORUM))
        await asyncio.sleep(4 * TYPING_INTERVAL)
        later = fake.chat_action_log(FORUM)

    assert reply.text == "done thinking" and reply.message_thread_id == 77
    assert len(later) == after_reply
    assert {(action, topic) for action, topic, _ in later} == {("typing", 77)}  # in the topic


# ---------------------------------------------------------------- notifications


async def test_a_notification_is_posted_to_the_home_chat(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic
) -> None:
    fake.add_chat(GROUP, "supergroup")
    async with telegram_gateway(tmp_path, fake, model, home_chat=GROUP) as gw:
        result = await gw.components.poster.notify(CHANNEL, None, "**deploy** done")
        (posted,) = await fake.wait_for_sent(GROUP, 1, timeout=REPLY)
        await asyncio.sleep(0.2)

    assert len(result.outbox_ids) == 1
    assert (posted.text, posted.parse_mode) == ("deploy done", "HTML")
    assert posted.entities == [{"type": "bold", "offset": 0, "length": 6}]
    assert posted.reply_to_message_id is None and posted.message_thread_id is None
    assert len(fake.sent_messages(GROUP)) == 1
    assert model.requests == []  # posted as is, no turn


# ---------------------------------------------------------------- start-up failure


async def test_a_bad_token_fails_the_channel_but_the_gateway_runs(
    tmp_path: Path, fake: FakeTelegramAPI, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bad_token = "7000001:stale-token-123"
    async with telegram_gateway(tmp_path, fake, model, token=bad_token) as gw:
        channels = (await gw.components.status.report()).channels
        turn = await say(gw, "still there?")

    state = channels[CHANNEL]
    assert state.state == "failed"
    assert state.detail.startswith(f"{CHANNEL}: Telegram rejected the bot token")
    assert "TELEGRAM_BOT_TOKEN" in state.detail
    assert bad_token not in state.detail and bad_token not in caplog.text
    assert channels["console"].state == "connected"
    assert turn.status == "completed" and turn.text == "**re:** still there?"
