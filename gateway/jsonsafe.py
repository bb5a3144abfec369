"""Bounded JSON decoding of untrusted input, and bounded lines for newline-delimited JSON.

Everything a peer sends (a socket client, a webhook, an MCP server) is decoded here, so
every such parser has the same limits: a size cap, strict UTF-8, strict JSON (no ``NaN``
or ``Infinity``) and a nesting cap. Whatever is wrong, the error is one
:class:`JSONInputError` with a short message that quotes none of the input and is safe to
send back to the peer. No other gateway module is imported.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.errors import RefusedError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "JSONInputError", "loads", "read_line"]

MAX_BYTES = 1 << 20
# Deeper than any message this gateway exchanges; shallow enough that code walking a
# decoded value recursively never comes near Python's recursion limit.
MAX_DEPTH = 64


class JSONInputError(RefusedError, ValueError):
    """The input is too long, not UTF-8, not JSON, or nested too deeply."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(data: bytes | bytearray | str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """Decode one JSON text from an untrusted peer.

    Args:
        data: The JSON text; bytes must be UTF-8.
        max_bytes: The longest input accepted (in characters when ``data`` is a :obj:`str`).
        max_depth: The deepest nesting of arrays and objects accepted.

    Raises:
        :class:`JSONInputError`: The input is refused; the message says why.
    """
    if len(data) > max_bytes:
        raise JSONInputError(f"JSON text longer than {max_bytes} bytes")
    if isinstance(data, str):
        text = data
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONInputError(f"not valid UTF-8 (at byte {exc.start})") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:  # the C scanner stops at Python's recursion limit, long before a crash
        raise JSONInputError(_too_deep(max_depth)) from None
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:  # a NaN, or an integer longer than Python converts
        raise JSONInputError(f"not JSON ({exc})") from None
    # Fewer brackets than the cap cannot nest past it: the walk is only for the rare rest.
    if text.count("[") + text.count("{") > max_depth and _deeper_than(value, max_depth):
        raise JSONInputError(_too_deep(max_depth))
    return value


def _too_deep(max_depth: int) -> str:
    return f"JSON nested deeper than {max_depth} levels"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


async def read_line(reader: asyncio.StreamReader, limit: int) -> bytes | None:
    """The next line of a newline-delimited stream, without its newline.

    A line longer than ``limit`` is read to its end and dropped, so the line after it is
    read normally: the framing survives and the connection can go on.

    Args:
        reader: The stream; its own ``limit`` must be at least ``limit``.
        limit: The longest line accepted, in bytes.

    Returns:
        The line, or :obj:`None` at the end of the stream (a last line without a newline
        is returned first).

    Raises:
        :class:`JSONInputError`: The line was longer than ``limit``.
    """
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None
    except asyncio.LimitOverrunError as exc:
        await _skip_line(reader, exc.consumed)
        raise JSONInputError(f"line longer than {limit} bytes") from None
    if len(line) - 1 > limit:
        raise JSONInputError(f"line longer than {limit} bytes")
    return line[:-1]


async def _skip_line(reader: asyncio.StreamReader, buffered: int) -> None:
    """Drop the rest of an overlong line: ``buffered`` bytes (without a newline), then up to
    and including the next newline, never holding more than the reader's limit."""
    while True:
        await reader.readexactly(buffered)
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError as exc:
            buffered = exc.consumed
