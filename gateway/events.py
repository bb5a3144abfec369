"""In-process notifications about threads (turn started/ended), for live clients.

Nothing here is durable: the database is the record; these only wake up listeners such
as ``talon chat``.
"""

from __future__ import annotations

from typing import Any

from gateway.subscriptions import Subscriptions

Event = dict[str, Any]


class EventBus(Subscriptions[int, Event]):
    """A thread's events by ``threads.id``: ``publish(thread_id, event)``, and
    ``subscribe(thread_id, queue=None)`` to receive them (into ``queue`` when given) while
    the context is open."""
