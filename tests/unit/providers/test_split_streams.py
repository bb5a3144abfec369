"""Replies streamed cut anywhere (inside surrogate pairs, inside UTF-8 characters, with
invalid UTF-8) come out of both providers as the model's text, and never as a failure."""

from __future__ import annotations

import pytest

from gateway.runtime.model import ChatMessage, ModelRequest, ToolSpec
from tests.fakes.model_api import EVERY_UNIT, Call, Reply
from tests.fakes.model_script import echo_responder, split_everywhere, utf16_length
from tests.unit.providers.conftest import Api

# Emoji (a ZWJ family, flags, a skin tone), CJK (one outside the BMP), combining marks.
TEXT = "Hi 😀 👩‍👩‍👧‍👦 🇯🇵🇺🇦 👍🏽 — 中文字符 日本語 𠀋 𝄞 — e\u0301 n\u0303 a\u0308\u0304 ok"

NOTE = ToolSpec("note", "Keep a note.", {"type": "object", "properties": {"text": {"type": "string"}}})


def ask(tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest(model="test-model", system="", messages=(ChatMessage("user", "go"),), tools=tools)


@pytest.mark.parametrize("raw_utf8", [False, True], ids=["escaped", "raw-utf8"])
async def test_text_cut_at_every_utf16_unit_arrives_whole(api: Api, raw_utf8: bool) -> None:
    api.fake.script(Reply(text=TEXT, utf16_cuts=EVERY_UNIT, raw_utf8=raw_utf8, cut_characters=raw_utf8))
    shown: list[str] = []

    async def on_text(delta: str) -> None:
        delta.encode("utf-8")  # each streamed piece is valid text on its own
        shown.append(delta)

    response = await api.provider().complete(ask(), on_text)

    assert response.text == TEXT
    assert "".join(shown) == TEXT


async def test_text_cut_once_at_each_position_arrives_whole(api: Api) -> None:
    cuts = range(1, utf16_length(TEXT))
    api.fake.script(*(Reply(text=TEXT, utf16_cuts=[cut], raw_utf8=cut % 2 == 0) for cut in cuts))
    provider = api.provider()

    texts = [(await provider.complete(ask())).text for _ in cuts]

    assert texts == [TEXT] * len(cuts)


async def test_tool_arguments_cut_at_every_utf16_unit_arrive_whole(api: Api) -> None:
    api.fake.script(
        Reply(tool_calls=[Call("note", {"text": TEXT})], argument_cuts=EVERY_UNIT, raw_utf8=True),
    )

    response = await api.provider().complete(ask((NOTE,)))

    assert [(c.name, c.arguments) for c in response.tool_calls] == [("note", {"text": TEXT})]


async def test_invalid_utf8_from_the_server_becomes_replacement_characters(api: Api) -> None:
    # One character's bytes cut between two deltas: each delta's line is invalid UTF-8.
    cafe = "é".encode()
    api.fake.script(Reply(chunks=["caf", cafe[:1], cafe[1:] + b" au lait \xff"]))

    response = await api.provider().complete(ask())

    assert response.text == "caf\ufffd\ufffd au lait \ufffd"


async def test_halves_without_partners_and_nul_become_replacement_characters(api: Api) -> None:
    api.fake.script(Reply(chunks=["a\udc00", "b\ud83d", "\x00c ", "end \ud83d"]))
    shown: list[str] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    response = await api.provider().complete(ask(), on_text)

    assert response.text == "a\ufffdb\ufffd\ufffdc end \ufffd"
    assert "".join(shown) == response.text


async def test_the_split_everywhere_responder_echoes_exactly(api: Api) -> None:
    # What the standalone stand-in serves with --split, for daemons in their own process.
    api.fake.responder = split_everywhere(echo_responder)
    request = ModelRequest("test-model", "", (ChatMessage("user", TEXT),))

    response = await api.provider().complete(request)

    assert response.text == f"echo: {TEXT}"
