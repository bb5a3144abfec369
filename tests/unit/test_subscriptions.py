"""Live subscriptions by key, as the event bus and the console channel use them."""

from __future__ import annotations

import asyncio

import pytest

from gateway.subscriptions import Subscriptions


async def test_items_reach_the_queues_of_their_key_while_subscribed_only() -> None:
    subs: Subscriptions[str, int] = Subscriptions()
    subs.publish("a", 0)  # nobody listens: dropped
    with subs.subscribe("a") as first, subs.subscribe("a") as second, subs.subscribe("b") as other:
        subs.publish("a", 1)
        assert (first.get_nowait(), second.get_nowait()) == (1, 1)
        assert other.empty()
    subs.publish("a", 2)
    assert first.empty() and second.empty()


async def test_one_queue_subscribed_to_two_sources_receives_both() -> None:
    deliveries: Subscriptions[str, str] = Subscriptions()
    events: Subscriptions[int, str] = Subscriptions()
    inbox: asyncio.Queue[str] = asyncio.Queue()
    with deliveries.subscribe("main", inbox), events.subscribe(7, inbox):
        deliveries.publish("main", "message")
        events.publish(7, "turn_ended")
    assert [inbox.get_nowait(), inbox.get_nowait()] == ["message", "turn_ended"]


async def test_a_full_bounded_queue_makes_publish_raise() -> None:
    subs: Subscriptions[str, int] = Subscriptions()
    with subs.subscribe("a", asyncio.Queue(maxsize=1)) as queue:
        subs.publish("a", 1)
        with pytest.raises(asyncio.QueueFull):
            subs.publish("a", 2)
    assert queue.get_nowait() == 1
