"""The "Bot is typing…" indicator, kept alive per thread while a turn runs.

Discord shows it for about 10 seconds after each trigger (or until the bot posts), so it is
triggered again every ``interval`` seconds until the turn ends, for at most ``max_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import discord

from connectors.base import ThreadKey

log = logging.getLogger("talon.connectors.discord")


class TypingIndicators:
    """One small task per thread that is working.

    Args:
        client: the logged-in client.
        interval: seconds between triggers (Discord's indicator lasts ~10 s).
        max_seconds: stop on our own after this long, in case the end is never reported.
    """

    def __init__(self, client: discord.Client, *, interval: float = 8.0, max_seconds: float = 900.0) -> None:
        self._client = client
        self._interval = interval
        self._max_seconds = max_seconds
        self._tasks: dict[ThreadKey, asyncio.Task[None]] = {}

    def set(self, thread: ThreadKey, working: bool) -> None:
        current = self._tasks.get(thread)
        if not working:
            if current is not None:
                current.cancel()
                self._tasks.pop(thread, None)
            return
        if current is not None and not current.done():
            return
        try:
            channel_id = int(thread.topic or thread.chat_id)
        except ValueError:
            log.debug("no typing indicator for %s: not a channel id", thread)
            return
        task = asyncio.create_task(self._run(channel_id), name=f"discord-typing-{thread}")
        self._tasks[thread] = task
        task.add_done_callback(lambda done, key=thread: self._forget(key, done))

    def _forget(self, thread: ThreadKey, task: asyncio.Task[None]) -> None:
        if self._tasks.get(thread) is task:
            del self._tasks[thread]

    async def _run(self, channel_id: int) -> None:
        channel = self._client.get_partial_messageable(channel_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_seconds
        while loop.time() < deadline:
            try:
                await channel.typing()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("typing indicator for discord channel %s failed: %r", channel_id, exc)
            await asyncio.sleep(self._interval)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
