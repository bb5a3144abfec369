"""What users see when the bot answers on Discord, and how failures reach the outbox."""

from __future__ import annotations

import asyncio
import time

import pytest

from connectors.base import ErrorClass, OutboundChunk, RenderedChunk, ThreadKey
from tests.fakes.discord_api import FakeDiscord
from tests.integration.discord.conftest import CHANNEL, StartConnector, wait_until


def chunk(text: str) -> RenderedChunk:
    return RenderedChunk(text=text, plain=text, format="markdown")


def long_markdown() -> str:
    parts = ["# Quarterly report\n"]
    for i in range(12):
        parts.append(f"## Section {i}\n\n" + ("Revenue grew steadily this quarter. " * 12) + "\n")
        parts.append("```python\n" + "".join(f"total_{i}_{n} = compute({n})\n" for n in range(15)) + "```\n")
    parts.append(
        "| region | q1 | q2 |\n|---|---|---|\n" + "".join(f"| r{n} | {n} | {n * 2} |\n" for n in range(20))
    )
    text = "\n".join(parts)
    assert len(text) >= 10_000
    return text


async def test_long_rendered_answer_arrives_as_valid_messages(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    try:
        from connectors.render import render_markdown  # noqa: F401
    except ImportError:
        pytest.skip("connectors.render.render_markdown is not available yet")
    connector, _ = await start_connector()
    chunks = connector.render(long_markdown())
    assert len(chunks) >= 5
    thread = ThreadKey(CHANNEL, fake.channel_id)

    results = [await connector.send(OutboundChunk(i, thread, c)) for i, c in enumerate(chunks, 1)]

    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    sent = fake.sent(fake.channel_id)
    assert [m["content"] for m in sent] == [c.text for c in chunks]
    assert all(len(m["content"]) <= 2000 for m in sent)
    assert all(m["content"].count("```") % 2 == 0 for m in sent)  # no code block cut open
    assert [r.platform_message_id for r in results] == [m["id"] for m in sent]


async def test_chunks_arrive_in_order_without_pinging_anyone(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    texts = [f"part {i}: " + ("x" * 1900) for i in range(5)] + ["@everyone ```py\nprint(1)\n```"]
    thread = ThreadKey(CHANNEL, fake.channel_id)

    results = [await connector.send(OutboundChunk(i, thread, chunk(t))) for i, t in enumerate(texts, 1)]

    assert all(r.ok for r in results)
    sent = fake.sent(fake.channel_id)
    assert [m["content"] for m in sent] == texts
    assert all(m["allowed_mentions"] == {"parse": []} for m in sent)  # no @everyone, users or roles


async def test_reply_threading_in_guild_channels_threads_and_dms(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    in_channel = fake.inject_message(fake.channel_id, "q1", author_id=fake.user_id, mention_bot=True)
    in_thread = fake.inject_message(
        fake.channel_id, "q2", author_id=fake.user_id, thread_id=fake.thread_id, mention_bot=True
    )
    in_dm = fake.inject_message(fake.dm_channel_id, "q3", author_id=fake.user_id, guild=False)
    await rec.wait_for(3)

    for n, mid in enumerate((in_channel, in_thread, in_dm), 1):
        event = rec.by_id(mid)
        result = await connector.send(OutboundChunk(n, event.thread_key, chunk(f"answer {n}"), reply_to=mid))
        assert result.ok

    (channel_reply,) = fake.sent(fake.channel_id)
    (thread_reply,) = fake.sent(fake.thread_id)
    (dm_reply,) = fake.sent(fake.dm_channel_id)
    assert channel_reply["message_reference"]["message_id"] == in_channel
    assert channel_reply["referenced_message"]["content"] == f"<@{fake.bot_id}> q1"
    assert thread_reply["message_reference"]["message_id"] == in_thread
    assert "message_reference" not in dm_reply


async def test_reply_to_a_deleted_message_still_sends(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    result = await connector.send(
        OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), chunk("hi"), reply_to="123456789")
    )
    assert result.ok
    assert fake.sent(fake.channel_id)[0]["content"] == "hi"


async def test_too_long_message_is_permanent(fake: FakeDiscord, start_connector: StartConnector) -> None:
    connector, _ = await start_connector()
    result = await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), chunk("x" * 2001)))
    assert not result.ok
    assert result.error_class is ErrorClass.PERMANENT
    assert "50035" in (result.error or "")
    assert fake.sent(fake.channel_id) == []


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (403, 50013, ErrorClass.PERMANENT),
        (404, 10003, ErrorClass.PERMANENT),
        (400, 50006, ErrorClass.PERMANENT),
        (503, 0, ErrorClass.TRANSIENT),
    ],
)
async def test_platform_errors_are_classified(
    fake: FakeDiscord, start_connector: StartConnector, status: int, code: int, expected: ErrorClass
) -> None:
    connector, _ = await start_connector()
    fake.fail_next_send(status, code)
    result = await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), chunk("hello")))
    assert not result.ok
    assert result.error_class is expected
    assert str(status) in (result.error or "")
    assert fake.sent(fake.channel_id) == []


async def test_unknown_channel_is_permanent(fake: FakeDiscord, start_connector: StartConnector) -> None:
    connector, _ = await start_connector()
    result = await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, "31337"), chunk("hello")))
    assert result.error_class is ErrorClass.PERMANENT
    bad = await connector.send(OutboundChunk(2, ThreadKey(CHANNEL, "general"), chunk("hello")))
    assert bad.error_class is ErrorClass.PERMANENT


async def test_long_rate_limit_goes_back_to_the_outbox_with_retry_after(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    item = OutboundChunk(7, ThreadKey(CHANNEL, fake.channel_id), chunk("later"))
    fake.fail_next_send(429, retry_after=45.0)

    started = time.monotonic()
    result = await connector.send(item)

    assert time.monotonic() - started < 5  # not slept through
    assert result.error_class is ErrorClass.TRANSIENT
    assert result.retry_after == pytest.approx(45.0)
    assert fake.sent(fake.channel_id) == []

    # the outbox's retry after retry_after delivers exactly once
    again = await connector.send(item)
    assert again.ok
    assert [m["content"] for m in fake.sent(fake.channel_id)] == ["later"]


async def test_short_rate_limit_is_waited_out_once_without_duplicate(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    fake.fail_next_send(429, retry_after=0.3)

    started = time.monotonic()
    result = await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), chunk("soon")))

    assert result.ok
    assert time.monotonic() - started >= 0.3
    assert fake.send_attempts(fake.channel_id) == 2
    assert [m["content"] for m in fake.sent(fake.channel_id)] == ["soon"]


async def test_rate_limit_without_via_header_is_transient(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    fake.fail_next_send(429, retry_after=3.0, via=False)
    result = await connector.send(OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), chunk("x")))
    assert result.error_class is ErrorClass.TRANSIENT
    assert result.retry_after == pytest.approx(3.0)
    assert fake.send_attempts(fake.channel_id) == 1


async def test_timeout_after_sending_is_ambiguous_and_a_resend_does_not_duplicate(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector(send_timeout=0.3)
    item = OutboundChunk(11, ThreadKey(CHANNEL, fake.channel_id), chunk("slow network"))
    fake.delay_next_send(1.0)

    result = await connector.send(item)

    assert result.error_class is ErrorClass.AMBIGUOUS
    (landed,) = await fake.wait_for_sent(fake.channel_id, 1)
    again = await connector.send(item)
    assert again.ok
    assert again.platform_message_id == landed["id"]
    assert len(fake.sent(fake.channel_id)) == 1


async def test_unreachable_api_is_transient(start_connector: StartConnector) -> None:
    async with FakeDiscord() as gone:
        connector, _ = await start_connector(server=gone)
        thread = ThreadKey(CHANNEL, gone.channel_id)
    await wait_until(lambda: connector.health.state == "reconnecting", 5.0, "reconnecting")
    # Sending has a client of its own: give its pooled connection time to see the server's
    # close, or the send goes out on it and is ambiguous instead.
    await asyncio.sleep(0.3)

    result = await connector.send(OutboundChunk(1, thread, chunk("anyone?")))

    assert result.error_class is ErrorClass.TRANSIENT
    assert "connect" in (result.error or "")


async def test_typing_indicator_is_refreshed_while_working(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, _ = await start_connector()
    thread = ThreadKey(CHANNEL, fake.channel_id, fake.thread_id)

    await connector.set_working(thread, True)
    await fake.wait_for_typing(fake.thread_id, 3)
    await connector.set_working(thread, False)
    await asyncio.sleep(0.05)  # a trigger already on the wire may still land
    count = fake.typing_count(fake.thread_id)
    await asyncio.sleep(0.25)  # five intervals
    assert fake.typing_count(fake.thread_id) == count
    assert fake.typing_count(fake.channel_id) == 0
    # a bad thread key is ignored, not raised
    await connector.set_working(ThreadKey(CHANNEL, "not-a-number"), True)
