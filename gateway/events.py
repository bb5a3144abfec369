"""In-process notifications about threads (turn started/ended), for live clients.

Nothing here is durable: the database is the record; these only wake up listeners such
as ``talon chat``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

Event = dict[str, Any]


class EventBus:
    def __init__(self) -> None:
        self._subscribers: defaultdict[int, set[asyncio.Queue[Event]]] = defaultdict(set)

    def publish(self, thread_id: int, event: Event) -> None:
        for queue in self._subscribers.get(thread_id, ()):
            queue.put_nowait(event)

    @contextmanager
    def subscribe(
        self, thread_id: int, queue: asyncio.Queue[Event] | None = None
    ) -> Iterator[asyncio.Queue[Event]]:
        """Receive the thread's events (into ``queue`` when given) while the context is open."""
        queue = queue if queue is not None else asyncio.Queue()
        self._subscribers[thread_id].add(queue)
        try:
            yield queue
        finally:
            self._subscribers[thread_id].discard(queue)
            if not self._subscribers[thread_id]:
                del self._subscribers[thread_id]
