"""The "typing…" indicator: one small task per thread that repeats the chat action."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from telegram.error import RetryAfter, TelegramError

from connectors.base import ThreadKey
from connectors.telegram.sending import retry_after_seconds

log = logging.getLogger("talon.connectors.telegram")


class TypingIndicators:
    """Keeps ``typing`` showing in each working thread until told to stop.

    Telegram clears a chat action after about five seconds, so it is resent every
    ``interval`` seconds. A thread nobody switches off stops after ``max_seconds``.

    The indicator is a courtesy and must not compete with replies for connections: at
    most ``max_in_flight`` actions wait for Telegram at once (a refresh that finds them
    busy is skipped), and an action already on the wire is let finish when its thread
    stops working, because cancelling it would close its pooled connection.

    Args:
        send_action: sends one ``typing`` action to a thread.
        interval: seconds between actions.
        max_seconds: the longest an indicator runs on its own.
        delay: seconds before the first action (a quick reply needs none).
        max_in_flight: actions waiting for Telegram at once, across threads.
    """

    def __init__(
        self,
        send_action: Callable[[ThreadKey], Awaitable[object]],
        *,
        interval: float,
        max_seconds: float,
        delay: float = 0.0,
        max_in_flight: int = 4,
    ) -> None:
        self._delay = delay
        self._send_action = send_action
        self._interval = interval
        self._max_seconds = max_seconds
        self._max_in_flight = max_in_flight
        self._in_flight: set[asyncio.Task[object]] = set()
        self._tasks: dict[ThreadKey, asyncio.Task[None]] = {}

    def set(self, thread: ThreadKey, working: bool) -> None:
        task = self._tasks.get(thread)
        if working:
            if task is None or task.done():
                self._tasks[thread] = asyncio.create_task(self._run(thread), name=f"typing {thread}")
        elif task is not None:
            del self._tasks[thread]
            task.cancel()

    async def stop_all(self) -> None:
        tasks = [*self._tasks.values(), *self._in_flight]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, thread: ThreadKey) -> None:
        loop = asyncio.get_running_loop()
        until = loop.time() + self._max_seconds
        try:
            await asyncio.sleep(self._delay)
            while loop.time() < until:
                delay = self._interval
                try:
                    await self._send_once(thread)
                except RetryAfter as exc:
                    delay = max(delay, retry_after_seconds(exc))
                except TelegramError as exc:
                    log.debug("typing indicator for %s failed: %s", thread, exc)
                await asyncio.sleep(delay)
        finally:
            if self._tasks.get(thread) is asyncio.current_task():
                del self._tasks[thread]

    async def _send_once(self, thread: ThreadKey) -> None:
        if len(self._in_flight) >= self._max_in_flight:
            return
        action = asyncio.ensure_future(self._send_action(thread))
        self._in_flight.add(action)
        action.add_done_callback(_settled(self._in_flight))
        await asyncio.shield(action)


def _settled(in_flight: set[asyncio.Task[object]]) -> Callable[[asyncio.Task[object]], None]:
    def done(action: asyncio.Task[object]) -> None:
        in_flight.discard(action)
        if not action.cancelled() and action.exception() is not None:
            log.debug("typing indicator failed: %s", action.exception())

    return done
