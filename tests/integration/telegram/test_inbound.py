"""What the gateway receives when people write to the bot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from connectors.base import Connector, ThreadKey
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.telegram.conftest import CHANNEL, StartConnector, wait_until

GROUP = -1001234567890


async def test_dm_becomes_an_event_that_needs_a_reply(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, intake = await start_connector()
    update_id = fake.inject_message(42, "hello there", user_id=42, first_name="Ada")

    [event] = await intake.wait_for(1)

    assert event.channel == CHANNEL
    assert event.event_id == str(update_id)
    assert event.thread_key == ThreadKey(CHANNEL, "42", None)
    assert event.chat_type == "dm"
    assert (event.sender.id, event.sender.display_name, event.sender.is_bot) == ("42", "Ada", False)
    assert event.text == "hello there"
    assert event.needs_reply is True
    assert event.platform_message_id == str(event.raw["message"]["message_id"])
    assert event.raw["update_id"] == update_id
    assert connector.health.state == "connected"
    assert connector.bot_username == fake.bot_username
    assert isinstance(connector, Connector)


async def test_group_answers_only_when_addressed(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector(trigger_words=["talon"])
    fake.inject_message(GROUP, "lunch anyone?", user_id=1, chat_type="supergroup")
    fake.inject_message(GROUP, "@talon_test_bot summarize this", user_id=1, chat_type="supergroup")
    fake.inject_message(GROUP, "thanks!", user_id=2, chat_type="supergroup", reply_to_bot=True)
    fake.inject_message(GROUP, "hey Talon, status?", user_id=3, chat_type="supergroup")
    fake.inject_message(GROUP, "ask @someone_else", user_id=3, chat_type="supergroup")

    events = await intake.wait_for(5)

    assert [e.chat_type for e in events] == ["group"] * 5
    assert {e.thread_key for e in events} == {ThreadKey(CHANNEL, str(GROUP), None)}
    assert [e.mentions_bot for e in events] == [False, True, False, False, False]
    assert [e.needs_reply for e in events] == [False, True, True, True, False]
    replied = events[2]
    assert replied.reply_to == str(replied.raw["message"]["reply_to_message"]["message_id"])


async def test_mention_by_text_mention_entity(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector()
    entity = {"type": "text_mention", "offset": 0, "length": 5, "user": fake.bot_user}
    fake.inject_message(GROUP, "Talon, please look", user_id=1, chat_type="group", entities=[entity])

    [event] = await intake.wait_for(1)

    assert event.mentions_bot and event.needs_reply


async def test_forum_topic_is_its_own_thread(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector()
    fake.inject_message(
        GROUP, "@talon_test_bot in topic", user_id=1, chat_type="supergroup", message_thread_id=77
    )

    [event] = await intake.wait_for(1)

    assert event.thread_key == ThreadKey(CHANNEL, str(GROUP), "77")
    assert event.chat_type == "thread"
    assert event.needs_reply


async def test_commands_addressed_to_the_bot_are_normalized(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    _, intake = await start_connector()
    fake.inject_message(GROUP, "/stop@talon_test_bot", user_id=1, chat_type="group")
    fake.inject_message(GROUP, "/new@Talon_Test_Bot fresh start", user_id=1, chat_type="group")
    fake.inject_message(42, "/start", user_id=42)
    fake.inject_message(GROUP, "/stop@other_bot", user_id=1, chat_type="group")

    # In update order: the chats' updates are taken in side by side.
    events = sorted(await intake.wait_for(4), key=lambda e: int(e.event_id))

    assert [e.text for e in events] == ["/stop", "/new fresh start", "/start", "/stop@other_bot"]
    assert [e.mentions_bot for e in events] == [True, True, False, False]
    assert [e.needs_reply for e in events] == [True, True, True, False]


async def test_channel_post(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector()
    fake.inject_message(-1009, "announcement", user_id=5, chat_type="channel")

    [event] = await intake.wait_for(1)

    assert event.chat_type == "channel"
    assert event.sender.id == "-1009"
    assert not event.needs_reply


async def test_own_messages_are_ignored_even_when_bots_are_allowed(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    _, intake = await start_connector(allow_bots=True)
    fake.inject_message(GROUP, "my own words", user_id=fake.bot_id, chat_type="group", is_bot=True)
    fake.inject_message(GROUP, "another bot", user_id=555, chat_type="group", is_bot=True)
    last = fake.inject_message(GROUP, "a person", user_id=1, chat_type="group")

    await wait_until(lambda: not fake.pending_update_ids() and len(intake.events) >= 2)

    assert [e.text for e in intake.events] == ["another bot", "a person"]
    assert intake.events[0].sender.is_bot
    assert intake.events[-1].event_id == str(last)


async def test_other_bots_refused_by_default(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector()
    fake.inject_message(GROUP, "beep", user_id=555, chat_type="group", is_bot=True)
    fake.inject_message(GROUP, "a person", user_id=1, chat_type="group")

    await intake.wait_for(1)
    await wait_until(lambda: not fake.pending_update_ids())

    assert [e.text for e in intake.events] == ["a person"]


async def test_refused_sender_gets_nothing_and_nothing_is_downloaded(
    fake: FakeTelegramAPI, start_connector: StartConnector, files_dir: Path
):
    _, intake = await start_connector(allowed_users=["42"])
    fake.inject_message(666, "let me in", user_id=666, document=("secret.txt", b"payload"))
    fake.inject_message(42, "hi", user_id=42)

    [event] = await intake.wait_for(1)
    await wait_until(lambda: not fake.pending_update_ids())
    await asyncio.sleep(0.05)

    assert event.sender.id == "42"
    assert intake.calls == 1
    assert fake.calls_to("getFile") == []
    assert await asyncio.to_thread(lambda: not files_dir.exists() or not any(files_dir.rglob("*")))
    assert fake.sent_messages(666) == []


async def test_refused_chat(fake: FakeTelegramAPI, start_connector: StartConnector):
    _, intake = await start_connector(allowed_chats=[str(GROUP)])
    fake.inject_message(-100999, "@talon_test_bot hi", user_id=1, chat_type="supergroup")
    fake.inject_message(GROUP, "@talon_test_bot hi", user_id=1, chat_type="supergroup")

    [event] = await intake.wait_for(1)

    assert event.thread_key.chat_id == str(GROUP)


async def test_attachments_downloaded_within_the_size_cap(
    fake: FakeTelegramAPI, start_connector: StartConnector, files_dir: Path
):
    _, intake = await start_connector(max_attachment_bytes=1000)
    fake.inject_message(42, "see attached", user_id=42, document=("notes.txt", b"n" * 600, "text/plain"))
    fake.inject_message(42, "", user_id=42, document=("report.pdf", b"r" * 3000, "application/pdf"))
    fake.inject_message(42, "a picture", user_id=42, photo=b"p" * 800)

    doc, big, photo = await intake.wait_for(3)

    [att] = doc.attachments
    assert att.name == "notes.txt" and att.mime_type == "text/plain" and att.size == 600
    assert await asyncio.to_thread(Path(att.path).read_bytes) == b"n" * 600
    assert Path(att.path).parent == files_dir / CHANNEL / "42"
    assert doc.text == "see attached"

    assert big.attachments == ()
    assert big.text == "[attachment report.pdf skipped: 3 KB over the 1 KB limit]"

    [pic] = photo.attachments
    assert (
        await asyncio.to_thread(Path(pic.path).read_bytes) == b"p" * 800
    )  # the largest size, not the thumbnail
    assert len(fake.calls_to("getFile")) == 2  # the oversized file was never requested


async def test_topic_attachment_lands_in_the_topic_folder(
    fake: FakeTelegramAPI, start_connector: StartConnector, files_dir: Path
):
    _, intake = await start_connector()
    fake.inject_message(
        GROUP, "", user_id=1, chat_type="supergroup", message_thread_id=5, document=("../../etc/passwd", b"x")
    )

    [event] = await intake.wait_for(1)

    [att] = event.attachments
    assert Path(att.path).parent == files_dir / CHANNEL / str(GROUP) / "5"
    assert Path(att.path).name.endswith("_passwd")
