"""The turn's time limit stands still while the turn waits for a human.

The turn runner opens ``asyncio.timeout`` around a turn and hands it to :func:`turn_deadline`;
:func:`waiting` (used around a wait for an answer) moves that deadline on by the time waited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["turn_deadline", "waited_seconds", "waiting"]

_deadline: ContextVar[asyncio.Timeout | None] = ContextVar("talon_turn_deadline", default=None)
_waited: ContextVar[list[float] | None] = ContextVar("talon_turn_waited", default=None)


@contextmanager
def turn_deadline(timeout: asyncio.Timeout) -> Iterator[None]:
    """``timeout`` is the running turn's limit (set inside its ``async with``)."""
    token = _deadline.set(timeout)
    waited = _waited.set([0.0])
    try:
        yield
    finally:
        _deadline.reset(token)
        _waited.reset(waited)


@contextmanager
def waiting() -> Iterator[None]:
    """The time spent inside does not count against the turn's limit."""
    started = time.monotonic()
    try:
        yield
    finally:
        spent = time.monotonic() - started
        timeout = _deadline.get()
        if timeout is not None and timeout.when() is not None and not timeout.expired():
            timeout.reschedule(timeout.when() + spent)  # type: ignore[operator]
        total = _waited.get()
        if total is not None:
            total[0] += spent


def waited_seconds() -> float:
    """Seconds this turn has waited for humans so far."""
    total = _waited.get()
    return total[0] if total is not None else 0.0
