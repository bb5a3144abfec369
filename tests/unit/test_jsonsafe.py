"""Bounded JSON decoding: every way input can be wrong ends in one error type with a short reason."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.jsonsafe import MAX_DEPTH, JSONInputError, loads, read_line


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_good_json_decodes_from_bytes_and_text() -> None:
    doc = {"a": [1, 2.5, "é", None, True], "b": {"c": {}}}
    assert loads(json.dumps(doc).encode()) == doc
    assert loads(json.dumps(doc)) == doc


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
        (b'{"a": 1} trailing', "not JSON (Extra data at line 1 column 10)"),
        (b"", "not JSON (Expecting value at line 1 column 1)"),
        (b'{"a": NaN}', "not JSON (NaN is not a JSON value)"),
        (b"[Infinity]", "not JSON (Infinity is not a JSON value)"),
        (b'"\xff\xfe"', "not valid UTF-8 (at byte 1)"),
        (b"1" * 5000, "not JSON (Exceeds the limit (4300 digits) for integer string conversion"),
    ],
    ids=["malformed", "trailing", "empty", "nan", "infinity", "utf8", "huge-int"],
)
def test_malformed_input_names_the_problem(data: bytes, reason: str) -> None:
    with pytest.raises(JSONInputError) as caught:
        loads(data)
    assert str(caught.value).startswith(reason)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("text", ["[" * 100_000, _nested(100_000), '{"a":' * 100_000, _nested(MAX_DEPTH + 1)])
def test_deep_nesting_is_refused_whatever_the_depth(text: str) -> None:
    with pytest.raises(JSONInputError, match=f"^JSON nested deeper than {MAX_DEPTH} levels$"):
        loads(text)


def test_nesting_up_to_the_cap_is_accepted_and_brackets_in_strings_do_not_count() -> None:
    assert loads(_nested(MAX_DEPTH)) is not None
    assert loads(json.dumps({"text": "[" * 10_000, "list": [[1], [2], {"x": [3]}] * 1000}))["text"]
    assert loads('{"a": [{"b": 1}]}', max_depth=3) == {"a": [{"b": 1}]}  # three levels
    with pytest.raises(JSONInputError, match="deeper than 2 levels"):
        loads('{"a": [{"b": 1}]}', max_depth=2)


def test_size_cap() -> None:
    assert loads(b'"' + b"x" * 98 + b'"', max_bytes=100) == "x" * 98
    with pytest.raises(JSONInputError, match=r"^JSON text longer than 100 bytes$"):
        loads(b'"' + b"x" * 99 + b'"', max_bytes=100)


async def _lines(data: bytes, limit: int) -> list[bytes | str | None]:
    reader = asyncio.StreamReader(limit=limit)
    reader.feed_data(data)
    reader.feed_eof()
    out: list[bytes | str | None] = []
    while True:
        try:
            line = await read_line(reader, limit)
        except JSONInputError as exc:
            out.append(str(exc))
            continue
        out.append(line)
        if line is None:
            return out


async def test_read_line_skips_an_overlong_line_and_keeps_the_framing() -> None:
    data = b"one\n" + b"x" * 1000 + b"\ntwo\n" + b"y" * 300 + b"\n\nlast"
    assert await _lines(data, 64) == [
        b"one",
        "line longer than 64 bytes",
        b"two",
        "line longer than 64 bytes",
        b"",
        b"last",
        None,
    ]


async def test_read_line_at_the_end_of_an_overlong_unterminated_line() -> None:
    assert await _lines(b"ok\n" + b"z" * 500, 64) == [b"ok", "line longer than 64 bytes", None]
