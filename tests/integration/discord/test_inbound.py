"""What reaches the gateway when people write to the bot on Discord."""

from __future__ import annotations

import asyncio
from pathlib import Path

from connectors.base import OutboundChunk, RenderedChunk, ThreadKey
from tests.fakes.discord_api import FakeDiscord
from tests.integration.discord.conftest import CHANNEL, StartConnector


async def test_dm_becomes_an_event_that_wants_a_reply(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    mid = fake.inject_message(fake.dm_channel_id, "hello there", author_id=fake.user_id, guild=False)

    (event,) = await rec.wait_for(1)
    assert event.event_id == mid == event.platform_message_id
    assert event.thread_key == ThreadKey(CHANNEL, fake.dm_channel_id, None)
    assert event.chat_type == "dm"
    assert event.needs_reply is True
    assert event.text == "hello there"
    assert event.sender.id == fake.user_id
    assert event.sender.display_name == "Alice"
    assert event.sender.is_bot is False
    assert event.raw["id"] == mid and event.raw["content"] == "hello there"


async def test_group_mention_wants_a_reply_and_plain_group_message_does_not(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    asked = fake.inject_message(fake.channel_id, "what time is it?", author_id=fake.user_id, mention_bot=True)
    chatter = fake.inject_message(fake.channel_id, "lunch anyone?", author_id=fake.user_id)

    await rec.wait_for(2)
    first, second = rec.by_id(asked), rec.by_id(chatter)
    assert first.thread_key == ThreadKey(CHANNEL, fake.channel_id, None)
    assert first.chat_type == "group"
    assert first.mentions_bot is True
    assert first.needs_reply is True
    assert first.text == "what time is it?"
    assert second.mentions_bot is False
    assert second.needs_reply is False
    assert [e.event_id for e in rec.events] == [asked, chatter]


async def test_thread_messages_are_keyed_by_parent_channel_and_thread(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    known = fake.inject_message(
        fake.channel_id,
        "in a known thread",
        author_id=fake.user_id,
        thread_id=fake.thread_id,
        mention_bot=True,
    )
    # a thread created after the bot connected is not in discord.py's cache
    fresh = fake.inject_message(fake.channel_id, "in a new thread", author_id=fake.user_id, thread_id="4242")

    await rec.wait_for(2)
    assert rec.by_id(known).thread_key == ThreadKey(CHANNEL, fake.channel_id, fake.thread_id)
    assert rec.by_id(known).chat_type == "thread"
    assert rec.by_id(known).needs_reply is True
    assert rec.by_id(fresh).thread_key == ThreadKey(CHANNEL, fake.channel_id, "4242")
    assert rec.by_id(fresh).chat_type == "thread"
    assert rec.by_id(fresh).needs_reply is False


async def test_reply_to_a_bot_message_wants_a_reply(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    result = await connector.send(
        OutboundChunk(1, ThreadKey(CHANNEL, fake.channel_id), RenderedChunk("Noted.", "Noted.", "markdown"))
    )
    assert result.ok

    mid = fake.inject_message(
        fake.channel_id, "and one more thing", author_id=fake.user_id, reply_to=result.platform_message_id
    )
    (event,) = await rec.wait_for(1)
    assert event.event_id == mid
    assert event.reply_to == result.platform_message_id
    assert event.mentions_bot is False
    assert event.needs_reply is True


async def test_trigger_word_wants_a_reply(fake: FakeDiscord, start_connector: StartConnector) -> None:
    _, rec = await start_connector(trigger_words=["talon"])
    fake.inject_message(fake.channel_id, "Talon, summarize this", author_id=fake.user_id)
    (event,) = await rec.wait_for(1)
    assert event.needs_reply is True


async def test_own_messages_are_ignored(fake: FakeDiscord, start_connector: StartConnector) -> None:
    _, rec = await start_connector()
    fake.inject_message(fake.channel_id, "I said this", author_id=fake.bot_id)
    later = fake.inject_message(fake.channel_id, "someone else", author_id=fake.user_id)

    await rec.wait_for(1)
    await asyncio.sleep(0.1)
    assert [e.event_id for e in rec.events] == [later]


async def test_unauthorized_user_never_reaches_intake_and_nothing_is_downloaded(
    fake: FakeDiscord, start_connector: StartConnector, tmp_path: Path
) -> None:
    _, rec = await start_connector(allowed_users=[fake.user_id])
    upload = fake.add_file("secret.txt", b"payload", content_type="text/plain")
    fake.inject_message(
        fake.channel_id, "let me in", author_id="99999", mention_bot=True, attachments=[upload]
    )
    fake.inject_message(fake.dm_channel_id, "dm from stranger", author_id="99998", guild=False)
    allowed = fake.inject_message(fake.channel_id, "hi", author_id=fake.user_id, mention_bot=True)

    await rec.wait_for(1)
    await asyncio.sleep(0.1)
    assert rec.calls == [allowed]
    assert fake.file_downloads(upload) == 0
    assert not (tmp_path / "files").exists()


async def test_other_bots_are_refused_unless_allowed(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    fake.inject_message(fake.channel_id, "beep", author_id="777", author_bot=True, mention_bot=True)
    human = fake.inject_message(fake.channel_id, "hi", author_id=fake.user_id, mention_bot=True)
    await rec.wait_for(1)
    await asyncio.sleep(0.1)
    assert rec.calls == [human]


async def test_commands_are_normalized(fake: FakeDiscord, start_connector: StartConnector) -> None:
    _, rec = await start_connector()
    fake.inject_message(fake.channel_id, "/stop", author_id=fake.user_id, mention_bot=True)
    fake.inject_message(fake.channel_id, "/new@talonbot please", author_id=fake.user_id)
    fake.inject_message(fake.dm_channel_id, "/start@SomeBot", author_id=fake.user_id, guild=False)

    await rec.wait_for(3)
    assert [e.text for e in rec.events] == ["/stop", "/new please", "/start"]


async def test_failed_intake_is_retried_with_the_same_event_id_before_later_messages(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    rec.fail_next = 1
    first = fake.inject_message(fake.channel_id, "first", author_id=fake.user_id, mention_bot=True)
    second = fake.inject_message(fake.channel_id, "second", author_id=fake.user_id, mention_bot=True)

    await rec.wait_for(2)
    assert rec.calls == [first, first, second]
    assert [e.event_id for e in rec.events] == [first, second]


async def test_malformed_gateway_event_is_skipped_and_the_connector_keeps_working(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    connector, rec = await start_connector()
    fake.inject_dispatch(
        "MESSAGE_CREATE", {"id": "1", "channel_id": fake.channel_id}
    )  # no author, no content
    fake.inject_dispatch("MESSAGE_CREATE", {"nonsense": True})
    fake.inject_dispatch("GUILD_MEMBER_UPDATE", {"guild_id": "not-a-number"})
    good = fake.inject_message(fake.channel_id, "still there?", author_id=fake.user_id, mention_bot=True)

    (event,) = await rec.wait_for(1)
    assert event.event_id == good
    assert connector.health.state == "connected"
    assert fake.gateway.resumes == 0 and len(fake.gateway.identifies) == 1


async def test_attachments_are_downloaded_within_the_size_cap(
    fake: FakeDiscord, start_connector: StartConnector, tmp_path: Path
) -> None:
    _, rec = await start_connector(max_attachment_bytes=1000)
    small = fake.add_file("notes.txt", b"meeting at 10", content_type="text/plain")
    big = fake.add_file("report.pdf", b"%PDF", content_type="application/pdf", size=30_000_000)
    mid = fake.inject_message(
        fake.channel_id,
        "see attached",
        author_id=fake.user_id,
        thread_id=fake.thread_id,
        mention_bot=True,
        attachments=[small, big],
    )

    (event,) = await rec.wait_for(1)
    (saved,) = event.attachments
    assert saved.name == "notes.txt"
    assert saved.mime_type == "text/plain"
    assert saved.size == 13
    path = Path(saved.path)
    assert await asyncio.to_thread(path.read_bytes) == b"meeting at 10"
    assert path.parent == tmp_path / "files" / CHANNEL / fake.channel_id / fake.thread_id
    assert path.name.startswith(mid)
    assert event.text == "see attached\n[attachment report.pdf skipped: 30 MB over the 1 KB limit]"
    assert fake.file_downloads(big) == 0


async def test_attachment_larger_than_declared_is_skipped(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector(max_attachment_bytes=10, allowed_chats=[fake.dm_channel_id])
    liar = fake.add_file("tiny.bin", b"x" * 2000, size=5)
    fake.inject_message(fake.dm_channel_id, "", author_id=fake.user_id, guild=False, attachments=[liar])

    (event,) = await rec.wait_for(1)
    assert event.attachments == ()
    assert event.text == "[attachment tiny.bin skipped: 2 KB over the 10 B limit]"


async def test_a_failing_chat_does_not_hold_up_other_chats(
    fake: FakeDiscord, start_connector: StartConnector
) -> None:
    _, rec = await start_connector()
    stuck = fake.inject_message(fake.channel_id, "retry me", author_id=fake.user_id, mention_bot=True)
    rec.failures[stuck] = 4  # about 0.75 s of retries
    other = fake.inject_message(fake.dm_channel_id, "independent", author_id=fake.user_id, guild=False)

    await rec.wait_for(2)
    assert [e.event_id for e in rec.events] == [other, stuck]
    assert rec.calls.count(stuck) == 5
