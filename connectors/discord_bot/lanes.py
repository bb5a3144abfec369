"""Ordered hand-off: items with the same key are handled one at a time, in arrival order;
different keys run in parallel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger("talon.connectors.discord")

T = TypeVar("T")


class Lanes(Generic[T]):
    """A worker task per busy key; it ends when its queue is empty.

    Args:
        handle: processes one item; an exception is logged and the lane goes on.
    """

    def __init__(self, handle: Callable[[T], Awaitable[None]]) -> None:
        self._handle = handle
        self._queues: dict[str, deque[T]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    def put(self, key: str, item: T) -> None:
        if self._closed:
            return
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self._tasks[key] = asyncio.create_task(self._work(key, queue), name=f"discord-lane-{key}")
        queue.append(item)

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    async def _work(self, key: str, queue: deque[T]) -> None:
        try:
            while queue:
                item = queue.popleft()
                try:
                    await self._handle(item)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("discord inbound handler failed")
        finally:
            # no await between the empty check and this cleanup, so no item is stranded
            self._queues.pop(key, None)
            self._tasks.pop(key, None)

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
