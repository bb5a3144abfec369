"""The Slack connector's pure pieces: event parsing, text cleanup, error classes, backoff."""

from __future__ import annotations

import aiohttp
import pytest

from connectors.base import ErrorClass, ThreadKey
from connectors.slack.errors import classify_send_error
from connectors.slack.files import human_size, safe_file_name
from connectors.slack.inbound import SkipEvent, parse_message, readable_text
from connectors.slack.socket import ReconnectBackoff
from gateway.backoff import Backoff

BOT = "U0FAKEBOT"


def _parse(**event: object):
    base = {"type": "message", "channel": "C0GENERAL", "user": "U0HUMAN01", "text": "hi", "ts": "10.000001"}
    return parse_message({**base, **event}, bot_user_id=BOT, bot_id="B0FAKEBOT")


def test_thread_keys_and_chat_types() -> None:
    top = _parse(channel_type="channel")
    assert (top.chat_type, top.thread_key("s")) == ("group", ThreadKey("s", "C0GENERAL", "10.000001"))
    reply = _parse(channel_type="channel", ts="11.000001", thread_ts="10.000001")
    assert (reply.chat_type, reply.thread_key("s")) == ("thread", ThreadKey("s", "C0GENERAL", "10.000001"))
    dm = _parse(channel="D0DM00001", channel_type="im", thread_ts="9.000001")
    assert (dm.chat_type, dm.thread_key("s")) == ("dm", ThreadKey("s", "D0DM00001", None))
    mention = _parse(type="app_mention", channel="D0DM00002")  # no channel_type: the id tells
    assert mention.chat_type == "dm" and mention.mentions(BOT)
    assert _parse(channel_type="mpim").chat_type == "group"


def test_mention_detection_matches_the_whole_id() -> None:
    assert _parse(text=f"hey <@{BOT}>").mentions(BOT)
    assert _parse(text=f"hey <@{BOT}|talon>").mentions(BOT)
    assert not _parse(text=f"hey <@{BOT}2>").mentions(BOT)
    assert not _parse(text=f"hey @{BOT}").mentions(BOT)


def test_message_and_app_mention_share_the_event_id() -> None:
    assert _parse().event_id == _parse(type="app_mention").event_id == "C0GENERAL:10.000001"


@pytest.mark.parametrize(
    ("event", "malformed"),
    [
        ({"subtype": "message_changed"}, False),
        ({"subtype": "message_deleted"}, False),
        ({"subtype": "channel_join"}, False),
        ({"user": BOT}, False),
        ({"bot_id": "B0FAKEBOT", "user": None}, False),
        ({"type": "reaction_added"}, False),
        ({"channel": None}, True),
        ({"ts": 12}, True),
        ({"user": None}, True),
    ],
)
def test_skipped_events(event: dict[str, object], malformed: bool) -> None:
    with pytest.raises(SkipEvent) as info:
        _parse(**event)
    assert info.value.malformed is malformed


def test_not_an_object_is_malformed() -> None:
    with pytest.raises(SkipEvent) as info:
        parse_message(["message"], bot_user_id=BOT, bot_id=None)
    assert info.value.malformed


def test_other_bots_and_file_shares_are_messages() -> None:
    other = _parse(bot_id="B0OTHER", subtype="bot_message", user=None)
    assert other.is_bot and other.sender == "B0OTHER"
    shared = _parse(subtype="file_share", files=[{"id": "F1"}, "junk"])
    assert shared.files == ({"id": "F1"},)


@pytest.mark.parametrize(
    ("raw", "readable"),
    [
        (f"<@{BOT}> what is 2 &lt; 3 &amp;&amp; 4 &gt; 1?", "@talon what is 2 < 3 && 4 > 1?"),
        (f"<@{BOT}> /stop", "/stop"),
        (f"<@{BOT}|talon>   /new@talon please", "/new please"),
        ("/start@talon_bot", "/start"),
        ("ask <@U0OTHER1> in <#C0RANDOM|random>", "ask <@U0OTHER1> in #random"),
        (
            "see <https://example.com/a?b=1|the docs> or <https://x.org>",
            "see the docs (https://example.com/a?b=1) or https://x.org",
        ),
        ("<http://example.com|example.com> and <mailto:a@b.org|a@b.org>", "http://example.com and a@b.org"),
        ("<!here> <!channel> <!subteam^S0123|@oncall>", "@here @channel @oncall"),
        ("&amp;lt; stays literal", "&lt; stays literal"),
    ],
)
def test_readable_text(raw: str, readable: str) -> None:
    assert readable_text(raw, bot_user_id=BOT, bot_name="talon") == readable


def test_human_size_and_file_names() -> None:
    assert human_size(30_000_000) == "30 MB"
    assert human_size(25_500_000) == "25.5 MB"
    assert human_size(1000) == "1 KB"
    assert human_size(999) == "999 bytes"
    assert safe_file_name("F0123", "../../etc/pass wd?.txt") == "F0123_pass wd_.txt"
    assert safe_file_name("F0123", "...") == "F0123_file"


def test_backoff_grows_is_capped_and_resets() -> None:
    backoff = ReconnectBackoff(Backoff(base=1.0, max=8.0))
    assert backoff.next_delay() == 0.0
    delays = []
    for _ in range(6):
        backoff.failed()
        delays.append(backoff.next_delay())
    assert 0.5 <= delays[0] <= 1.0
    assert 2.0 <= delays[2] <= 4.0
    assert all(4.0 <= d <= 8.0 for d in delays[3:])
    backoff.reset()
    assert backoff.next_delay() == 0.0


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (aiohttp.ConnectionTimeoutError("connect"), ErrorClass.TRANSIENT),
        (TimeoutError(), ErrorClass.AMBIGUOUS),
        (aiohttp.ServerDisconnectedError(), ErrorClass.AMBIGUOUS),
        (ValueError("odd"), ErrorClass.AMBIGUOUS),
    ],
)
def test_network_failures_are_classified(exc: BaseException, expected: ErrorClass) -> None:
    assert classify_send_error(exc).error_class is expected
