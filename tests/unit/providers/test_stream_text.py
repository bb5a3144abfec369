"""Streamed deltas and bytes are joined into valid text, however they were split."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

from gateway.runtime.providers.stream_text import TextJoiner, avalid_utf8, clean_text, valid_utf8
from gateway.runtime.providers.tool_arguments import parse_tool_arguments
from tests.fakes.model_script import EVERY_UNIT, utf16_length, utf16_pieces

TEXT = "Hi 😀 👩‍👩‍👧‍👦 🇯🇵🇺🇦 👍🏽 中文 𠀋 e\u0301 a\u0308\u0304 ok"


def join(deltas: list[str]) -> tuple[str, list[str]]:
    joiner = TextJoiner()
    shown = [joiner.append(d) for d in deltas]
    shown.append(joiner.finish())
    return joiner.text, shown


def test_deltas_cut_at_every_utf16_unit_join_into_the_text() -> None:
    deltas = utf16_pieces(TEXT, EVERY_UNIT)
    assert len(deltas) == utf16_length(TEXT)  # surrogate pairs really are cut in two

    text, shown = join(deltas)

    assert text == TEXT
    assert "".join(shown) == TEXT
    for piece in shown:
        piece.encode("utf-8")  # every piece shown on the way is valid on its own


def test_each_single_cut_joins_into_the_text() -> None:
    for cut in range(1, utf16_length(TEXT)):
        assert join(utf16_pieces(TEXT, [cut]))[0] == TEXT, cut


def test_lone_surrogates_and_nul_become_replacement_characters() -> None:
    text, _ = join(["a\udc00", "b\ud83d", "\x00c", "end \ud83d"])

    assert text == "a\ufffdb\ufffd\ufffdcend \ufffd"


def test_a_pair_inside_one_delta_becomes_its_character() -> None:
    assert clean_text("x\ud83d\ude00y") == "x😀y"


def test_valid_text_is_passed_through_unchanged() -> None:
    assert clean_text(TEXT) is TEXT


def test_bytes_cut_at_every_position_stay_the_same_text() -> None:
    data = TEXT.encode()
    for cut in range(1, len(data)):
        assert b"".join(valid_utf8(iter([data[:cut], data[cut:]]))) == data, cut


async def test_bytes_cut_everywhere_in_an_async_stream_stay_the_same_text() -> None:
    data = TEXT.encode()

    async def single_bytes() -> AsyncIterator[bytes]:
        for i in range(len(data)):
            yield data[i : i + 1]

    assert b"".join([chunk async for chunk in avalid_utf8(single_bytes())]) == data


def test_invalid_utf8_becomes_replacement_characters() -> None:
    chunks = [b"caf\xc3", b" ok \xed\xa0\xbd", b" \xff", b" end \xe4\xb8"]

    text = b"".join(valid_utf8(iter(chunks))).decode("utf-8")

    assert text == "caf\ufffd ok \ufffd\ufffd\ufffd \ufffd end \ufffd"


def test_tool_arguments_cut_anywhere_parse_to_the_same_value() -> None:
    raw = '{"note": "' + TEXT + '", "tags": ["🇺🇦", "中"]}'
    for a, b in itertools.combinations(range(1, utf16_length(raw), 5), 2):
        joiner = TextJoiner()
        for piece in utf16_pieces(raw, [a, b]):
            joiner.append(piece)
        joiner.finish()
        assert parse_tool_arguments(joiner.text) == {"note": TEXT, "tags": ["🇺🇦", "中"]}, (a, b)


def test_escaped_lone_surrogates_and_nul_in_arguments_become_replacement_characters() -> None:
    raw = '{"a": "\\ud83d!", "b": "\\ud83d\\ude00", "c": ["\\u0000", {"\\udc00": 1}]}'

    assert parse_tool_arguments(raw) == {"a": "\ufffd!", "b": "😀", "c": ["\ufffd", {"\ufffd": 1}]}
