"""Slack connector over Socket Mode against the fake Slack: what reaches the gateway, and when
Slack is told the event was received."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from connectors.base import ConnectorStartError, ThreadKey
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack.conftest import Recorder, make_connector, running, send_text


async def test_dm_becomes_one_dm_thread_that_wants_a_reply(fake: FakeSlack, files_dir: Path) -> None:
    fake.add_user("U0HUMAN01", "ada", display_name="Ada L.")
    async with running(fake, files_dir) as (_, recorder):
        ts = await fake.inject_message("D0DM00001", "hello &lt;there&gt;", user="U0HUMAN01")
        [event] = await recorder.wait_for(1)
        await fake.wait_for_acks(1)

    assert event.channel == "team-slack"
    assert event.event_id == f"D0DM00001:{ts}"
    assert event.thread_key == ThreadKey("team-slack", "D0DM00001", None)
    assert event.chat_type == "dm"
    assert event.needs_reply is True
    assert event.mentions_bot is False
    assert event.text == "hello <there>"
    assert event.sender.id == "U0HUMAN01"
    assert event.sender.display_name == "Ada L."
    assert event.sender.is_bot is False
    assert event.platform_message_id == ts
    assert event.raw["event"]["ts"] == ts


async def test_channel_mention_is_delivered_twice_by_slack_but_is_one_event(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (_, recorder):
        ts = await fake.inject_message("C0GENERAL", "what's up?", channel_type="channel", mention=True)
        await fake.wait_for_acks(2)  # the message and the app_mention envelope
        await asyncio.sleep(0.05)

    assert [e["event"]["type"] for e in (env.payload for env in fake.envelopes)] == ["message", "app_mention"]
    [event] = recorder.events
    assert event.event_id == f"C0GENERAL:{ts}"
    assert event.thread_key == ThreadKey("team-slack", "C0GENERAL", ts)  # opens a thread under itself
    assert event.chat_type == "group"
    assert event.mentions_bot is True
    assert event.needs_reply is True
    assert event.text == "@talon what's up?"


async def test_app_mention_alone_still_counts_as_a_mention(fake: FakeSlack, files_dir: Path) -> None:
    # An app subscribed to app_mention only (no message.channels) gets just this event.
    async with running(fake, files_dir) as (_, recorder):
        await fake.inject_event(
            {
                "type": "app_mention",
                "user": "U0HUMAN01",
                "text": "hi <@U0FAKEBOT>",
                "ts": "1700000000.000100",
                "channel": "C0GENERAL",
                "event_ts": "1700000000.000100",
            }
        )
        [event] = await recorder.wait_for(1)
    assert event.mentions_bot and event.needs_reply
    assert event.chat_type == "group"


async def test_group_message_without_mention_is_stored_but_not_answered(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (_, recorder):
        ts = await fake.inject_message("C0GENERAL", "lunch anyone?", channel_type="channel")
        [event] = await recorder.wait_for(1)
    assert event.needs_reply is False
    assert event.mentions_bot is False
    assert event.thread_key == ThreadKey("team-slack", "C0GENERAL", ts)


async def test_trigger_word_and_require_mention_off(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, trigger_words=["talon"]) as (_, recorder):
        await fake.inject_message("C0GENERAL", "hey Talon, status?", channel_type="channel")
        await fake.inject_message("C0GENERAL", "unrelated", channel_type="channel")
        first, second = await recorder.wait_for(2)
    assert (first.needs_reply, second.needs_reply) == (True, False)
    async with running(fake, files_dir, require_mention=False) as (_, recorder):
        await fake.inject_message("C0GENERAL", "unrelated", channel_type="channel")
        [event] = await recorder.wait_for(1)
    assert event.needs_reply is True


async def test_reply_in_a_thread_the_bot_answered_wants_a_reply(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        root = await fake.inject_message("C0GENERAL", "help", channel_type="channel", mention=True)
        [first] = await recorder.wait_for(1)
        result = await send_text(connector, first.thread_key, "On it.")
        assert result.ok
        reply = await fake.inject_message(
            "C0GENERAL", "thanks, and also...", channel_type="channel", thread_ts=root
        )
        other_root = await fake.inject_message("C0GENERAL", "chatter", channel_type="channel")
        await fake.inject_message("C0GENERAL", "more chatter", channel_type="channel", thread_ts=other_root)
        events = await recorder.wait_for(4)

    follow_up = events[1]
    assert follow_up.platform_message_id == reply
    assert follow_up.chat_type == "thread"
    assert follow_up.thread_key == ThreadKey("team-slack", "C0GENERAL", root)
    assert follow_up.reply_to == root
    assert follow_up.needs_reply is True
    assert events[3].chat_type == "thread" and events[3].needs_reply is False


async def test_own_messages_echoed_by_slack_are_ignored(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        result = await send_text(connector, ThreadKey("team-slack", "D0DM00001"), "Hello from the bot")
        assert result.ok
        await fake.wait_until(lambda: len(fake.envelopes) == 1, what="the echo")
        await fake.wait_for_acks(1)
    assert fake.envelopes[0].event["bot_id"] == "B0FAKEBOT"
    assert recorder.attempts == []


async def test_other_bots_are_ignored_unless_allowed(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (_, recorder):
        await fake.inject_message(
            "C0GENERAL", "beep", channel_type="channel", user="U0OTHERBOT", bot_id="B0OTHER"
        )
        await fake.wait_for_acks(1)
    assert recorder.attempts == []
    async with running(fake, files_dir, allow_bots=True) as (_, recorder):
        await fake.inject_message(
            "C0GENERAL", "beep", channel_type="channel", user="U0OTHERBOT", bot_id="B0OTHER"
        )
        [event] = await recorder.wait_for(1)
    assert event.sender.is_bot is True
    assert event.sender.display_name == "bot-b0other"


async def test_unauthorized_sender_gets_nothing_and_nothing_is_downloaded(
    fake: FakeSlack, files_dir: Path
) -> None:
    secret = fake.add_file("plan.txt", b"secret plan")
    async with running(fake, files_dir, allowed_users=["U0FRIEND1"]) as (connector, recorder):
        ts = await fake.inject_message("D0DM00001", "let me in", user="U0STRANGE", files=[secret])
        await fake.wait_for_acks(1)  # acknowledged, so Slack does not redeliver it
        await connector.set_working(ThreadKey("team-slack", "D0DM00001"), True)
        await fake.inject_message("D0DM00002", "hi", user="U0FRIEND1")
        [event] = await recorder.wait_for(1)

    assert recorder.attempts == [event]
    assert event.sender.id == "U0FRIEND1"
    assert fake.downloads == []
    assert fake.reactions("D0DM00001", ts) == set()
    assert not await asyncio.to_thread(files_dir.exists)


async def test_refused_chat(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, allowed_chats=["C0ALLOWED"]) as (_, recorder):
        await fake.inject_message("C0ELSEWHR", "hi", channel_type="channel", mention=True)
        await fake.inject_message("C0ALLOWED", "hi", channel_type="channel", mention=True)
        await fake.wait_for_acks(4)
    assert [e.thread_key.chat_id for e in recorder.attempts] == ["C0ALLOWED"]


async def test_event_is_acknowledged_only_after_intake_commits(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (_, recorder):
        recorder.failures = 1
        await fake.inject_message("D0DM00001", "remember this", user="U0HUMAN01")
        await fake.wait_until(lambda: len(recorder.attempts) == 1, what="the first intake attempt")
        await asyncio.sleep(0.1)
        [envelope] = fake.envelopes
        assert not envelope.acked  # intake failed: Slack must redeliver

        assert await fake.redeliver_unacked() == 1
        [event] = await recorder.wait_for(1)
        await fake.wait_for_acks(1)

    assert envelope.attempts == 2
    assert event.event_id == recorder.attempts[0].event_id
    assert event.text == "remember this"


async def test_redelivery_of_a_committed_event_is_acked_without_a_second_intake(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (_, recorder):
        await fake.inject_message("D0DM00001", "once", user="U0HUMAN01")
        await recorder.wait_for(1)
        await fake.wait_for_acks(1)
        fake.envelopes[0].acked = False  # as if the ack got lost on the way
        await fake.redeliver_unacked()
        await fake.wait_for_acks(1)
    assert len(recorder.attempts) == 1


async def test_malformed_and_housekeeping_events_are_skipped(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        await fake.send_raw("this is not json")
        await fake.send_raw('{"type": "events_api", "payload": {}}')  # no envelope id
        await fake.deliver(["not", "an", "object"])
        await fake.inject_event("not an event object")
        await fake.inject_event({"type": "message", "text": "no channel or ts"})
        await fake.inject_event(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": "D0DM00001",
                "ts": "1.000001",
                "message": {"text": "edited"},
            }
        )
        await fake.inject_event(
            {"type": "message", "subtype": "message_deleted", "channel": "D0DM00001", "ts": "1.000002"}
        )
        await fake.inject_event({"type": "reaction_added", "user": "U0HUMAN01", "reaction": "tada"})
        await fake.wait_for_acks(6)
        await fake.inject_message("D0DM00001", "still there?", user="U0HUMAN01")
        [event] = await recorder.wait_for(1)
        assert connector.health.state == "connected"
    assert event.text == "still there?"
    assert len(recorder.attempts) == 1
    assert all(e.acked for e in fake.envelopes)


async def test_commands_lose_the_bot_mention_and_suffix(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (_, recorder):
        await fake.inject_message("C0GENERAL", "/stop", channel_type="channel", mention=True)
        await fake.inject_message("D0DM00001", "/new@talon", user="U0HUMAN01")
        first, second = await recorder.wait_for(2)
    assert first.text == "/stop"
    assert second.text == "/new"


async def test_reconnects_after_the_connection_drops(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        assert connector.health.state == "connected"
        fake.refuse_sockets = True  # Slack cannot hand out a new URL for a while
        await fake.disconnect()
        await fake.wait_until(lambda: connector.health.state == "reconnecting", what="health reconnecting")
        await fake.wait_until(lambda: len(fake.calls("apps.connections.open")) >= 3, what="retries")
        fake.refuse_sockets = False
        await fake.wait_for_connections(2, timeout=10)
        await fake.wait_until(
            lambda: connector.health.state == "connected", timeout=10, what="health connected"
        )
        await fake.inject_message("D0DM00001", "are you back?", user="U0HUMAN01")
        [event] = await recorder.wait_for(1)
    assert event.text == "are you back?"
    assert connector.health.state == "stopped"


async def test_message_sent_while_disconnected_arrives_after_reconnect(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (_, recorder):
        fake.refuse_sockets = True
        await fake.disconnect()
        await fake.inject_message("D0DM00001", "queued while away", user="U0HUMAN01")
        fake.refuse_sockets = False
        [event] = await recorder.wait_for(1, timeout=10)
    assert event.text == "queued while away"


async def test_attachments_downloaded_within_the_size_cap(fake: FakeSlack, files_dir: Path) -> None:
    small = fake.add_file("notes.txt", b"x" * 300)
    big = fake.add_file("report.pdf", b"y" * 5000, mimetype="application/pdf")
    liar = fake.add_file("liar.bin", b"z" * 3000, declared_size=10)
    async with running(fake, files_dir, max_attachment_bytes=1000) as (_, recorder):
        ts = await fake.inject_message(
            "C0GENERAL", "see files", channel_type="channel", files=[small, big, liar]
        )
        [event] = await recorder.wait_for(1)

    [attachment] = event.attachments
    assert attachment.name == "notes.txt"
    assert attachment.size == 300
    assert await asyncio.to_thread(Path(attachment.path).read_bytes) == b"x" * 300
    assert Path(attachment.path).parent == files_dir / "team-slack" / "C0GENERAL" / ts
    assert "[attachment report.pdf skipped: 5 KB over the 1 KB limit]" in event.text
    assert "[attachment liar.bin skipped: over the 1 KB limit]" in event.text
    assert event.text.startswith("see files")
    assert await asyncio.to_thread(lambda: [p.name for p in Path(attachment.path).parent.iterdir()]) == [
        Path(attachment.path).name
    ]


async def test_working_indicator_is_a_reaction_on_the_triggering_message(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        root = await fake.inject_message("C0GENERAL", "question", channel_type="channel", mention=True)
        [event] = await recorder.wait_for(1)
        await connector.set_working(event.thread_key, True)
        await connector.set_working(event.thread_key, True)  # a second call changes nothing
        assert fake.reactions("C0GENERAL", root) == {"eyes"}
        later = await fake.inject_message(
            "C0GENERAL", "<@U0FAKEBOT> follow-up", channel_type="channel", thread_ts=root
        )
        await recorder.wait_for(2)
        await connector.set_working(event.thread_key, False)
        assert fake.reactions("C0GENERAL", root) == set()
        await connector.set_working(event.thread_key, True)
        assert fake.reactions("C0GENERAL", later) == {"eyes"}
        await connector.set_working(event.thread_key, False)
        fake.fail_next("reactions.add", "ratelimited", status=429, retry_after=1)
        await connector.set_working(event.thread_key, True)  # best effort: no exception
        await connector.set_working(event.thread_key, False)
    assert fake.reactions("C0GENERAL", later) == set()


async def test_bad_bot_token_fails_start_with_a_clear_message(fake: FakeSlack, files_dir: Path) -> None:
    connector = make_connector(fake, files_dir, bot_token="xoxb-not-the-right-one")
    with pytest.raises(ConnectorStartError) as info:
        await connector.start(Recorder())
    message = str(info.value)
    assert message.startswith("team-slack:")
    assert "SLACK_BOT_TOKEN" in message and "invalid_auth" in message
    assert "xoxb-not-the-right-one" not in message
    assert connector.health.state == "failed"
    await connector.stop()


async def test_bad_app_token_fails_start_with_a_clear_message(fake: FakeSlack, files_dir: Path) -> None:
    connector = make_connector(fake, files_dir, app_token="xapp-wrong")
    with pytest.raises(ConnectorStartError) as info:
        await connector.start(Recorder())
    assert "SLACK_APP_TOKEN" in str(info.value) and "xapp-wrong" not in str(info.value)
    connector = make_connector(fake, files_dir, app_token=fake.bot_token)
    with pytest.raises(ConnectorStartError, match="not an app-level token"):
        await connector.start(Recorder())
    assert fake.connections == 0


async def test_unreachable_slack_fails_start(files_dir: Path) -> None:
    async with FakeSlack() as gone:
        pass  # the port is closed again
    connector = make_connector(gone, files_dir)
    with pytest.raises(ConnectorStartError, match="cannot reach the Slack Web API"):
        await connector.start(Recorder())


async def test_stop_is_idempotent_and_stops_receiving(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        pass
    await connector.stop()
    assert connector.health.state == "stopped"
    await fake.inject_message("D0DM00001", "anyone?", user="U0HUMAN01")
    await asyncio.sleep(0.2)
    assert recorder.attempts == []
    assert fake.connections == 1


async def test_messages_of_a_chat_are_committed_in_slack_order(fake: FakeSlack, files_dir: Path) -> None:
    fake.add_user("U0SLOW001", "slow")
    fake.add_user("U0FAST001", "fast")
    fake.stall_next("users.info", 0.3)  # the first sender's name takes a while to look up
    async with running(fake, files_dir) as (_, recorder):
        await fake.inject_message("C0GENERAL", "first", channel_type="channel", user="U0SLOW001")
        await fake.inject_message("C0GENERAL", "second", channel_type="channel", user="U0FAST001")
        events = await recorder.wait_for(2)
    assert [e.text for e in events] == ["first", "second"]


async def test_slack_requested_refresh_moves_to_a_new_connection(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, recorder):
        await fake.disconnect(graceful=True)
        await fake.wait_for_connections(2)
        await fake.wait_until(lambda: fake.open_connections == 1, what="the old socket closed")
        await fake.inject_message("D0DM00001", "after refresh", user="U0HUMAN01")
        [event] = await recorder.wait_for(1)
        assert connector.health.state == "connected"
    assert event.text == "after refresh"
