"""Automatic retries of the web tools: idempotent requests only, transient failures only.

GET, HEAD and OPTIONS are tried again when the connection could not be opened or was dropped
(refused, reset, closed before the response); POST, PUT, PATCH and DELETE never are, since a
mutating request may have taken effect before its response was lost. The delays come from
:class:`gateway.backoff.Backoff`; the caller's timeout bounds the whole, waits included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp

from gateway.backoff import Backoff

__all__ = ["ATTEMPTS", "IDEMPOTENT", "transient", "with_retries"]

T = TypeVar("T")

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS"})
ATTEMPTS = 3
_BACKOFF = Backoff(base=0.2, max=1.0)


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a network failure worth one more try of an idempotent request."""
    if isinstance(exc, aiohttp.ClientSSLError):
        return False  # a certificate will not change in a second
    return isinstance(
        exc,
        aiohttp.ClientConnectorError
        | aiohttp.ServerDisconnectedError
        | aiohttp.ClientOSError
        | aiohttp.ClientPayloadError,
    )


async def with_retries(method: str, attempt: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """``attempt()``'s result and how many attempts it took; an idempotent ``method`` is tried
    up to :data:`ATTEMPTS` times while it fails transiently, any other exactly once."""
    tries = ATTEMPTS if method.upper() in IDEMPOTENT else 1
    for number in range(1, tries + 1):
        try:
            return await attempt(), number
        except aiohttp.ClientError as exc:
            if number == tries or not transient(exc):
                raise
        await asyncio.sleep(_BACKOFF.delay(number))
    raise AssertionError("unreachable")  # the loop returns or raises
