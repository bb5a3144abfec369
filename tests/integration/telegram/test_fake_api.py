"""The fake Bot API behaves like Telegram where the connector depends on it."""

from __future__ import annotations

import asyncio

import pytest
from telegram import Bot
from telegram.error import BadRequest, Conflict, InvalidToken

from tests.fakes.telegram_api import FakeTelegramAPI, HtmlParseError, auto_entities, parse_html, utf16_len


def bot_for(fake: FakeTelegramAPI, token: str | None = None) -> Bot:
    return Bot(token or fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)


@pytest.mark.parametrize(
    ("html", "error"),
    [
        ("line<br>break", 'Unsupported start tag "br" at byte offset 4'),
        ("<b>open", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("ünïcode <x>", 'Unsupported start tag "x" at byte offset 10'),  # bytes, not characters
        ('<span class="other">x</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("tail <", "Unclosed start tag at byte offset 5"),
    ],
)
def test_html_errors_match_telegram(html: str, error: str):
    with pytest.raises(HtmlParseError) as info:
        parse_html(html)
    assert str(info.value) == error


def test_html_entities_and_offsets_in_utf16():
    text, entities = parse_html(
        '😀 <b>bold &amp; &lt;x&gt;</b> a &unknown; b <a href="https://e.com/?a=1&amp;b=2">l</a>'
    )

    assert text == "😀 bold & <x> a &unknown; b l"
    assert entities[0] == {"type": "bold", "offset": 3, "length": 10}
    assert entities[1] == {
        "type": "text_link",
        "offset": utf16_len(text) - 1,
        "length": 1,
        "url": "https://e.com/?a=1&b=2",
    }


def test_auto_entities_find_mentions_and_commands():
    found = auto_entities("/stop@talon_bot hey @talon_bot, mail a@b.com")

    assert [(e["type"], e["offset"], e["length"]) for e in found] == [
        ("bot_command", 0, 15),
        ("mention", 20, 10),
    ]


async def test_newer_get_updates_ends_the_older_one_with_conflict():
    async with FakeTelegramAPI() as fake, bot_for(fake) as first, bot_for(fake) as second:
        older = asyncio.create_task(first.get_updates(timeout=5))
        await fake.wait_for_call("getUpdates")
        newer = asyncio.create_task(second.get_updates(timeout=0))

        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await older
        assert await newer == ()


async def test_offset_confirms_and_long_poll_wakes_on_new_updates():
    async with FakeTelegramAPI() as fake, bot_for(fake) as bot:
        first = fake.inject_message(1, "one", user_id=1)
        assert [u.update_id for u in await bot.get_updates(timeout=0)] == [first]
        assert [u.update_id for u in await bot.get_updates(timeout=0)] == [first]  # not confirmed yet

        waiting = asyncio.create_task(bot.get_updates(offset=first + 1, timeout=5))
        await asyncio.sleep(0.05)
        second = fake.inject_message(1, "two", user_id=1)
        updates = await asyncio.wait_for(waiting, 1)

        assert [u.update_id for u in updates] == [second]
        assert fake.pending_update_ids() == [second]


async def test_unknown_token_is_unauthorized():
    async with FakeTelegramAPI() as fake:
        bot = bot_for(fake, token="1:nope")
        try:
            with pytest.raises(InvalidToken):
                await bot.initialize()  # getMe
        finally:
            await bot.shutdown()


async def test_send_edit_document_and_download():
    async with FakeTelegramAPI() as fake, bot_for(fake) as bot:
        fake.add_chat(7)
        with pytest.raises(BadRequest, match="Message is too long"):
            await bot.send_message(7, "😀" * 2049)  # 2049 characters, 4098 UTF-16 units
        with pytest.raises(BadRequest, match="Can't parse entities"):
            await bot.send_message(7, "<b>x", parse_mode="HTML")

        sent = await bot.send_message(7, "<i>draft</i>", parse_mode="HTML")
        await bot.edit_message_text("final", chat_id=7, message_id=sent.message_id)
        await bot.send_document(7, b"file body", filename="r.txt", caption="report")
        [edited, document] = fake.sent_messages(7)

        assert (edited.text, edited.edits) == ("final", 1)
        assert document.document == {"file_name": "r.txt", "size": 9, "file_id": document.document["file_id"]}
        tg_file = await bot.get_file(document.document["file_id"])
        assert bytes(await tg_file.download_as_bytearray()) == b"file body"
