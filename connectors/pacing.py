"""Outbound pacing: sends spaced to a platform's published rate limits.

A platform answers a burst above its limits with 429s, and every refused send costs a
round trip and a ``retry_after`` wait; pacing sends below the limits drains a burst
faster than retrying them. Each limit is a GCRA (generic cell rate algorithm) slot
reservation: a caller is given the next free slot and sleeps until it, so callers are
served in the order they asked (under a burst every chat gets its turn; none starves)
and nothing is dropped.

Limits applied, in order: the chat's own (groups and private chats may differ), then the
channel-wide one, then a cap on requests in flight, which keeps the HTTP connection pool
from running dry (a pool timeout is a send that never left, but it still wastes time).

In a cluster every node sends for the same bot, and the platform's channel-wide limit is the
bot's across all of them: each node paces at its share, the limit over the nodes alive
(:meth:`SendPacer.share`, from the cluster's heartbeat). A chat's own limit needs no sharing:
one node at a time sends a thread's messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from connectors.base import SendResult
from gateway.config import PacingSettings

_IDLE_FORGET = 120.0  # seconds after which an idle chat's limiter is dropped


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` sends per ``per`` seconds, with bursts of up to ``burst`` back to back."""

    count: float
    per: float = 1.0
    burst: int = 1

    @property
    def interval(self) -> float:
        return self.per / self.count


class Limiter:
    """One GCRA: :meth:`reserve` returns how long the caller must wait for its slot."""

    __slots__ = ("_interval", "_slack", "_tat")

    def __init__(self, rate: Rate, tat: float = 0.0) -> None:
        self._interval = rate.interval
        self._slack = (max(rate.burst, 1) - 1) * rate.interval
        self._tat = tat  # theoretical arrival time of the next send

    def reserve(self, now: float) -> float:
        tat = max(self._tat, now)
        self._tat = tat + self._interval
        return max(0.0, tat - self._slack - now)

    def hold(self, until: float) -> None:
        """No slot before ``until`` (the platform asked us to wait)."""
        self._tat = max(self._tat, until + self._slack)

    def idle_since(self, now: float) -> float:
        return now - self._tat

    def at_rate(self, rate: Rate) -> Limiter:
        """The same limiter at ``rate``, the slots already given out kept."""
        return Limiter(rate, self._tat)


@dataclass(frozen=True, slots=True)
class PacingPolicy:
    """The limits of one channel; ``None`` leaves that limit to the platform."""

    channel: Rate | None = None
    private_chat: Rate | None = None
    group_chat: Rate | None = None
    max_in_flight: int = 16

    @classmethod
    def from_settings(cls, settings: PacingSettings) -> PacingPolicy:
        burst = settings.burst
        return cls(
            channel=Rate(settings.per_second, burst=max(1, int(settings.per_second)))
            if settings.per_second
            else None,
            private_chat=Rate(settings.per_chat_per_second, burst=burst)
            if settings.per_chat_per_second
            else None,
            group_chat=Rate(settings.group_per_minute, 60.0, burst=burst)
            if settings.group_per_minute
            else None,
            max_in_flight=settings.max_in_flight,
        )


class SendPacer:
    """Spaces one channel's sends: :meth:`send` runs a platform call in its slot (or use
    ``async with pacer.slot(chat, group=...)`` around a call that raises instead)."""

    def __init__(self, policy: PacingPolicy) -> None:
        self.policy = policy
        self._channel = Limiter(policy.channel) if policy.channel else None
        self.sharers = 1
        self._chats: dict[str, Limiter] = {}
        self._in_flight = asyncio.Semaphore(max(policy.max_in_flight, 1))
        self._last_sweep = time.monotonic()

    @asynccontextmanager
    async def slot(self, chat: str, *, group: bool) -> AsyncIterator[None]:
        now = time.monotonic()
        chat_limiter = self._chat_limiter(chat, group, now)
        if chat_limiter is not None:
            await _sleep(chat_limiter.reserve(now))
        if self._channel is not None:
            await _sleep(self._channel.reserve(time.monotonic()))
        async with self._in_flight:
            yield

    async def send(self, chat: str, call: Callable[[], Awaitable[SendResult]], *, group: bool) -> SendResult:
        """``call()`` in the chat's next slot; a refusal's ``retry_after`` holds the chat's later sends."""
        async with self.slot(chat, group=group):
            result = await call()
        if result.retry_after:
            self.hold(chat, result.retry_after)
        return result

    def hold(self, chat: str, seconds: float) -> None:
        """The platform refused a send to ``chat`` for ``seconds``: later sends there wait too."""
        limiter = self._chats.get(chat)
        if limiter is not None:
            limiter.hold(time.monotonic() + seconds)

    def share(self, nodes: int) -> None:
        """Pace the channel-wide limit as one of ``nodes`` nodes sending for the same account."""
        nodes = max(1, nodes)
        rate = self.policy.channel
        if rate is None or self._channel is None or nodes == self.sharers:
            return
        self.sharers = nodes
        shared = Rate(rate.count / nodes, rate.per, burst=max(1, rate.burst // nodes))
        self._channel = self._channel.at_rate(shared)

    def _chat_limiter(self, chat: str, group: bool, now: float) -> Limiter | None:
        limiter = self._chats.get(chat)
        if limiter is None:
            rate = self.policy.group_chat if group else self.policy.private_chat
            if rate is None:
                return None
            limiter = self._chats[chat] = Limiter(rate)
        if now - self._last_sweep > _IDLE_FORGET:
            self._sweep(now)
        return limiter

    def _sweep(self, now: float) -> None:
        """Forget chats idle long enough that their limiter would allow a full burst."""
        self._last_sweep = now
        for chat in [c for c, lim in self._chats.items() if lim.idle_since(now) > _IDLE_FORGET]:
            del self._chats[chat]


async def _sleep(seconds: float) -> None:
    if seconds > 0:
        await asyncio.sleep(seconds)
