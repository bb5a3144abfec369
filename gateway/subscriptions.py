"""Live subscriptions by key: each subscriber is an :class:`asyncio.Queue` that receives what
is published under its key while its subscription is open.

Nothing here is durable and nothing is replayed: a subscriber sees only what is published
after it subscribed. No other gateway module is imported.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["Subscriptions"]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Subscriptions(Generic[K, T]):
    """Queues subscribed under keys; :meth:`publish` puts an item into each queue of its key."""

    def __init__(self) -> None:
        self._queues: dict[K, set[asyncio.Queue[T]]] = {}

    def publish(self, key: K, item: T) -> None:
        """Put ``item`` into every queue subscribed under ``key`` (none: nothing happens).

        Raises:
            :exc:`asyncio.QueueFull`: A subscriber passed a bounded queue that is full; the
                queues after it in this round do not receive ``item``.
        """
        for queue in self._queues.get(key, ()):
            queue.put_nowait(item)

    @contextmanager
    def subscribe(self, key: K, queue: asyncio.Queue[T] | None = None) -> Iterator[asyncio.Queue[T]]:
        """Receive what is published under ``key`` while the context is open.

        Args:
            key: What to listen to.
            queue: Where items go; a new unbounded queue when omitted. One queue may be
                subscribed under several keys, or to several :class:`Subscriptions`.

        Yields:
            The queue the items arrive in.
        """
        queue = queue if queue is not None else asyncio.Queue()
        self._queues.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            subscribed = self._queues.get(key, set())
            subscribed.discard(queue)
            if not subscribed:
                self._queues.pop(key, None)
