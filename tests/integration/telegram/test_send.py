"""What users see when the bot answers, and how failures are reported to the outbox."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path

import pytest
from telegram.request import HTTPXRequest

from connectors.base import ErrorClass, OutboundChunk, RenderedChunk, SendResult, ThreadKey
from connectors.telegram import TelegramConnector
from connectors.telegram.api import TelegramBot
from connectors.telegram.sending import send_chunk
from tests.fakes.telegram_api import FakeTelegramAPI, utf16_len
from tests.integration.telegram.conftest import (
    CHANNEL,
    FAST,
    TYPING_INTERVAL,
    RecordingIntake,
    StartConnector,
    make_settings,
    wait_until,
)

GROUP = -1001234567890
_ids = itertools.count(1)


def html(text: str, plain: str | None = None) -> RenderedChunk:
    return RenderedChunk(text=text, plain=plain if plain is not None else text, format="html")


async def send(
    connector: TelegramConnector,
    chat: int,
    chunk: RenderedChunk,
    *,
    thread: str | None = None,
    reply_to: str | None = None,
) -> SendResult:
    item = OutboundChunk(next(_ids), ThreadKey(CHANNEL, str(chat), thread), chunk, reply_to=reply_to)
    return await connector.send(item)


def long_markdown() -> str:
    parts = ["# Quarterly report"]
    for n in range(12):
        parts.append(f"Section {n} explains the **numbers** with `inline code` & <angle> brackets. " * 5)
        code = "\n".join(f"total_{n}_{i} = compute({i}) * 2  # step {i}" for i in range(12))
        parts.append(f"```python\n{code}\n```")
    rows = "".join(f"| row {i} | {i * 17} | ok |\n" for i in range(30))
    parts.append(f"| name | value | note |\n|---|---|---|\n{rows}")
    return "\n\n".join(parts)


async def test_long_rendered_answer_arrives_as_valid_chunks(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    connector, _ = await start_connector()
    fake.add_chat(42)
    markdown = long_markdown()
    assert len(markdown) >= 10_000
    chunks = connector.render(markdown)

    results = [await send(connector, 42, chunk) for chunk in chunks]

    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    sent = fake.sent_messages(42)
    assert len(sent) == len(chunks) >= 3
    assert all(m.parse_mode == "HTML" and utf16_len(m.text) <= 4096 for m in sent)
    seen = "\n".join(m.text for m in sent)
    for n in range(12):
        assert f"total_{n}_11 = compute(11) * 2  # step 11" in seen
    assert "row 29" in seen
    assert any("pre" in m.entity_types() for m in sent)
    assert [r.platform_message_id for r in results] == [str(m.message_id) for m in sent]


async def test_hand_made_chunks_near_the_limit(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, _ = await start_connector()
    fake.add_chat(42)
    code = "\n".join(f"x_{i} = {i} &lt; limit" for i in range(150))
    emoji = "😀" * 2000 + " done"  # 4005 UTF-16 code units in 2005 characters
    chunks = [
        html(f'<pre><code class="language-python">{code}</code></pre>'),
        html(f"<b>{emoji}</b>"),
        html('<i>end</i> &amp; <a href="https://example.com/a?b=1&amp;c=2">link</a>'),
    ]

    results = [await send(connector, 42, c) for c in chunks]

    assert all(r.ok for r in results)
    first, second, third = fake.sent_messages(42)
    assert first.text.endswith("x_149 = 149 < limit") and first.entity_types() == {"pre", "code"}
    assert second.text == emoji and utf16_len(second.text) == 4005
    assert third.text == "end & link"
    assert {
        "type": "text_link",
        "offset": 6,
        "length": 4,
        "url": "https://example.com/a?b=1&c=2",
    } in third.entities


async def test_group_answers_quote_the_question_and_topics_stay_in_their_topic(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    connector, _ = await start_connector()
    asked = fake.inject_message(GROUP, "question", user_id=1, chat_type="supergroup", message_thread_id=9)
    question_id = fake.injected(asked)["message"]["message_id"]
    fake.inject_message(42, "dm question", user_id=42)

    in_topic = await send(connector, GROUP, html("answer"), thread="9", reply_to=str(question_id))
    in_dm = await send(connector, 42, html("dm answer"), reply_to="1")
    deleted = await send(connector, GROUP, html("late answer"), thread="9", reply_to="999999")

    assert in_topic.ok and in_dm.ok and deleted.ok
    topic_answer, late = fake.sent_messages(GROUP)
    assert (topic_answer.message_thread_id, topic_answer.reply_to_message_id) == (9, question_id)
    assert (late.message_thread_id, late.reply_to_message_id) == (9, None)
    [dm_answer] = fake.sent_messages(42)
    assert dm_answer.reply_to_message_id is None


async def test_unparseable_html_is_resent_as_plain_text(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    connector, _ = await start_connector()
    fake.add_chat(42)

    result = await send(connector, 42, html("<b>unbalanced <i>tags</b>", plain="unbalanced tags"))

    assert result.ok
    [message] = fake.sent_messages(42)
    assert (message.text, message.parse_mode, message.entities) == ("unbalanced tags", None, [])
    assert len(fake.calls_to("sendMessage")) == 2


async def test_flood_control_is_transient_with_retry_after_and_no_duplicate(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    connector, _ = await start_connector()
    fake.add_chat(42)
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 7", retry_after=7)

    refused = await send(connector, 42, html("hello"))
    assert fake.sent_messages(42) == []
    retried = await send(connector, 42, html("hello"))

    assert (refused.ok, refused.error_class, refused.retry_after) == (False, ErrorClass.TRANSIENT, 7.0)
    assert retried.ok
    assert [m.text for m in fake.sent_messages(42)] == ["hello"]
    assert len(fake.calls_to("sendMessage")) == 2  # no silent retry inside the client


@pytest.mark.parametrize(
    ("status", "description", "expected"),
    [
        (403, "Forbidden: bot was blocked by the user", "not allowed to post here"),
        (400, "Bad Request: chat not found", "chat not found"),
        (400, "Bad Request: message is too long", "message is too long"),
    ],
)
async def test_permanent_failures(
    fake: FakeTelegramAPI, start_connector: StartConnector, status: int, description: str, expected: str
):
    connector, _ = await start_connector()
    fake.add_chat(42)
    fake.fail_next("sendMessage", status, description)

    result = await send(connector, 42, html("hi"))

    assert (result.ok, result.error_class) == (False, ErrorClass.PERMANENT)
    assert expected in (result.error or "").lower()


async def test_real_validation_errors_are_permanent(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, _ = await start_connector()
    fake.add_chat(42)

    unknown_chat = await send(connector, 31337, html("hi"))
    too_long = await send(connector, 42, html("x" * 4097))

    assert (
        unknown_chat.error_class == ErrorClass.PERMANENT
        and "chat not found" in (unknown_chat.error or "").lower()
    )
    assert too_long.error_class == ErrorClass.PERMANENT and "too long" in (too_long.error or "")
    assert fake.sent_messages(42) == []


async def test_timeout_after_sending_is_ambiguous(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, _ = await start_connector(tuning=dataclasses.replace(FAST, read_timeout=0.3))
    fake.add_chat(42)
    fake.hang_next("sendMessage", deliver=True)

    result = await send(connector, 42, html("did it arrive?"))

    assert (result.ok, result.error_class) == (False, ErrorClass.AMBIGUOUS)
    assert [m.text for m in fake.sent_messages(42)] == ["did it arrive?"]  # it did: resending would duplicate


async def test_connection_refused_is_transient(files_dir: Path):
    async with FakeTelegramAPI() as short_lived:
        short_lived.add_chat(42)
        connector = TelegramConnector(make_settings(short_lived), files_dir=files_dir, tuning=FAST)
        await connector.start(RecordingIntake())
    try:
        result = await send(connector, 42, html("anyone?"))
    finally:
        await connector.stop()

    assert (result.ok, result.error_class) == (False, ErrorClass.TRANSIENT)


async def test_send_before_start_is_transient(fake: FakeTelegramAPI, files_dir: Path):
    connector = TelegramConnector(make_settings(fake), files_dir=files_dir, tuning=FAST)

    result = await send(connector, 42, html("early"))

    assert result.error_class == ErrorClass.TRANSIENT


async def test_typing_indicator_runs_while_working(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, _ = await start_connector()
    fake.add_chat(42)
    fake.inject_message(GROUP, "x", user_id=1, chat_type="supergroup", message_thread_id=3)
    dm, topic = ThreadKey(CHANNEL, "42"), ThreadKey(CHANNEL, str(GROUP), "3")
    loop = asyncio.get_running_loop()
    started = loop.time()

    await connector.set_working(dm, True)
    await connector.set_working(dm, True)  # already on: still one indicator
    await connector.set_working(topic, True)
    await wait_until(lambda: len(fake.chat_actions(42)) >= 4 and len(fake.chat_actions(GROUP)) >= 2)
    elapsed = loop.time() - started
    await connector.set_working(dm, False)
    await connector.set_working(topic, False)
    dm_count = len(fake.chat_actions(42))
    await asyncio.sleep(0.2)

    assert dm_count <= elapsed / TYPING_INTERVAL + 2  # repeated by one task, not two
    assert set(fake.chat_actions(42)) == {"typing"}
    assert len(fake.chat_actions(42)) == dm_count  # stopped
    topic_calls = [p for p in fake.calls_to("sendChatAction") if p["chat_id"] == GROUP]
    assert all(p["message_thread_id"] == 3 for p in topic_calls)


async def test_typing_failures_never_raise(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, _ = await start_connector()
    fake.fail_next("sendChatAction", 400, "Bad Request: chat not found", times=100)

    await connector.set_working(ThreadKey(CHANNEL, "31337"), True)
    await fake.wait_for_call("sendChatAction", 3)  # kept trying after failures
    await connector.set_working(ThreadKey(CHANNEL, "31337"), False)
    await connector.set_working(ThreadKey(CHANNEL, "not-a-chat", "x"), True)
    await connector.stop()
    await connector.set_working(ThreadKey(CHANNEL, "31337"), True)  # after stop: ignored


async def test_a_turn_quicker_than_the_typing_delay_sends_no_chat_action(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    connector, _ = await start_connector()
    fake.add_chat(42)
    quick, slow = ThreadKey(CHANNEL, "42"), ThreadKey(CHANNEL, "43")
    fake.add_chat(43)

    await connector.set_working(quick, True)
    await connector.set_working(slow, True)
    await asyncio.sleep(FAST.typing_delay / 5)
    await connector.set_working(quick, False)
    await fake.wait_for_call("sendChatAction", 1, timeout=FAST.typing_delay + 5)
    await connector.set_working(slow, False)

    assert fake.chat_actions(42) == []
    assert set(fake.chat_actions(43)) == {"typing"}


async def test_a_pool_timeout_is_transient_because_the_request_never_left(fake: FakeTelegramAPI):
    """PTB raises ``TimedOut`` for a full connection pool; nothing reached Telegram."""
    fake.add_chat(42)
    bot = TelegramBot(
        fake.token,
        base_url=fake.base_url,
        request=HTTPXRequest(connection_pool_size=1, pool_timeout=0.2, read_timeout=30),
    )
    await bot.initialize()
    fake.hang_next("sendMessage")
    try:
        held = asyncio.create_task(
            send_chunk(bot, OutboundChunk(next(_ids), ThreadKey(CHANNEL, "42"), html("first")))
        )
        await fake.wait_for_call("sendMessage", 1)
        result = await send_chunk(bot, OutboundChunk(next(_ids), ThreadKey(CHANNEL, "42"), html("second")))
        fake.drop_connections()
        await held
    finally:
        await bot.close()

    assert (result.ok, result.error_class) == (False, ErrorClass.TRANSIENT)
    assert "not sent" in (result.error or "")
    assert len(fake.calls_to("sendMessage")) == 1
