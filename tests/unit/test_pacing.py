"""Outbound pacing: limits kept, chats served in turn, 429 waits honoured."""

from __future__ import annotations

import asyncio
import time

from connectors.pacing import Limiter, PacingPolicy, Rate, SendPacer
from gateway.config import PacingSettings, TelegramChannel


def test_a_limiter_allows_its_burst_then_one_per_interval() -> None:
    limiter = Limiter(Rate(1, burst=3))
    assert [limiter.reserve(0.0) for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]
    # Ten idle seconds refill the burst, and no more than it.
    assert [limiter.reserve(15.0) for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]


def test_a_hold_pushes_every_later_slot() -> None:
    limiter = Limiter(Rate(1, burst=1))
    limiter.hold(until=5.0)
    assert limiter.reserve(0.0) == 5.0


def test_telegram_defaults_follow_the_published_limits_and_keys_override_one_by_one() -> None:
    channel = TelegramChannel(name="tg", type="telegram", token="t", pacing={"per_second": 10})
    assert channel.pacing == PacingSettings(per_second=10, per_chat_per_second=1, group_per_minute=20)
    policy = PacingPolicy.from_settings(channel.pacing)
    assert policy.group_chat == Rate(20, 60.0, burst=3)


async def test_under_a_burst_chats_take_turns_and_the_channel_rate_holds() -> None:
    # 50/s: a token every 20 ms, so chats wait their turn even when the loop is slow (at 200/s a
    # slow machine found a token free each time the first chat asked, and no one waited).
    pacer = SendPacer(PacingPolicy(channel=Rate(50, burst=1), private_chat=None, max_in_flight=4))
    order: list[str] = []

    async def chat(name: str) -> None:
        for _ in range(5):
            async with pacer.slot(name, group=False):
                order.append(name)

    started = time.monotonic()
    await asyncio.gather(*(chat(f"c{n}") for n in range(10)))
    elapsed = time.monotonic() - started
    assert elapsed >= 49 / 50 * 0.9, "50 sends at 50/s take about a second"
    # Every chat had its first send before any chat had its third.
    first_third = min(i for i, name in enumerate(order) if order[: i + 1].count(name) == 3)
    assert {n for n in order[:first_third]} == {f"c{n}" for n in range(10)}


async def test_a_private_chat_is_paced_on_its_own() -> None:
    pacer = SendPacer(PacingPolicy(private_chat=Rate(20, burst=1)))
    times: list[float] = []
    other: list[float] = []

    async def busy() -> None:
        for _ in range(3):
            async with pacer.slot("busy", group=False):
                times.append(time.monotonic())

    async def quiet() -> None:
        async with pacer.slot("quiet", group=False):
            other.append(time.monotonic())

    started = time.monotonic()
    await asyncio.gather(busy(), quiet())
    assert times[2] - times[0] >= 2 / 20 * 0.9
    assert other[0] - started < 0.05, "another chat does not wait for the busy one"


async def test_sends_in_flight_are_capped() -> None:
    pacer = SendPacer(PacingPolicy(max_in_flight=3))
    active = peak = 0

    async def send(n: int) -> None:
        nonlocal active, peak
        async with pacer.slot(f"c{n}", group=True):
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    await asyncio.gather(*(send(n) for n in range(20)))
    assert peak == 3


async def test_nodes_sharing_a_bot_each_send_at_their_share_of_the_channel_rate() -> None:
    pacer = SendPacer(PacingPolicy(channel=Rate(40, burst=4), private_chat=None))
    pacer.share(2)  # two nodes alive: 20/s here, bursts of 2

    async def send_all(n: int) -> float:
        started = time.monotonic()
        for c in range(n):
            async with pacer.slot(f"c{c}", group=False):
                pass
        return time.monotonic() - started

    assert await send_all(12) >= 10 / 20 * 0.9, "12 sends at 20/s after a burst of 2 take half a second"
    pacer.share(1)  # the other node is gone: the whole rate again
    await asyncio.sleep(0.2)  # let the burst refill
    assert await send_all(12) < 0.4, "12 sends at 40/s after a burst of 4 take 0.2 s (0.5 s at 20/s)"
