"""A Discord bot's gateway sessions: one for all of its guilds, or one per shard.

Each session has a client of its own, so a session that reconnects or logs in again leaves
sending (the connector's own client, over REST) and the other shards alone. In a cluster a
session first waits for its gate: the role of its shard, which one node holds at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable

import discord

from connectors.base import ConnectorStartError, ReceiveGate
from connectors.discord_bot.client import TalonDiscordClient
from gateway.backoff import Backoff

__all__ = [
    "FATAL_CLOSE_CODES",
    "IDENTIFY_INTERVAL",
    "GatewaySession",
    "IdentifyPacer",
    "TokenRejectedError",
    "receiver_name",
]

log = logging.getLogger("talon.connectors.discord")

_GATEWAY_RESTART = Backoff(base=1.0, max=60.0)
# Discord's 5 s between two session starts of a bucket, and room for the time an IDENTIFY
# takes to arrive: one sent at the end of exactly 5 s may get there after a late predecessor.
IDENTIFY_INTERVAL = 5.5
FATAL_CLOSE_CODES = {
    4004: "the gateway rejected the bot token; reset it in the Discord Developer Portal",
    4010: "invalid shard sent to the gateway; check this channel's shard_count",
    4011: "the bot is in too many guilds and needs sharding: raise this channel's shard_count",
    4012: "invalid gateway API version",
    4013: "invalid gateway intents",
    4014: (
        "the Message Content intent is not enabled for this bot: turn on Bot -> Privileged "
        "Gateway Intents -> Message Content Intent in the Discord Developer Portal"
    ),
}


class TokenRejectedError(ConnectorStartError):
    """Discord answered 401: retrying with the same token cannot help."""


def receiver_name(shard: int, count: int) -> str:
    """The session's name as a cluster receiver (connectors/base.py): ``""`` unsharded."""
    return "" if count == 1 else f"shard-{shard}-of-{count}"


class IdentifyPacer:
    """Discord starts at most ``max_concurrency`` sessions of a bot per 5 seconds: shard ``i``
    identifies in bucket ``i % max_concurrency``, one IDENTIFY per bucket per interval. The
    sessions of one process take their turns here; a node that takes shards over from a lost
    node starts at a different moment, and an IDENTIFY Discord finds too early is answered
    with an invalid session, which discord.py retries through this pacer again."""

    def __init__(self, max_concurrency: int = 1, interval: float = IDENTIFY_INTERVAL) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.interval = interval
        self._locks: dict[int, asyncio.Lock] = {}
        self._last: dict[int, float] = {}

    async def wait(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Return when shard ``shard_id`` may send its IDENTIFY."""
        bucket = (shard_id or 0) % self.max_concurrency
        lock = self._locks.setdefault(bucket, asyncio.Lock())
        loop = asyncio.get_running_loop()
        async with lock:
            delay = self._last.get(bucket, -math.inf) + self.interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._last[bucket] = loop.time()


class GatewaySession:
    """One gateway session: waits for its gate, logs in, and keeps it connected.

    discord.py reconnects and resumes by itself; when its connect loop gives up on a
    recoverable error, this starts it again with a fresh login after a capped, jittered
    backoff. A close code no retry can fix (:data:`FATAL_CLOSE_CODES`) fails the session.

    Args:
        channel: the Talon channel's name, for logs.
        shard: (shard id, shard count); (0, 1) for an unsharded bot.
        login: logs in a new client for the session it is given.
        gate: what to wait on before receiving (a cluster node's role), or None.
        on_change: called after :attr:`state` changes.
    """

    def __init__(
        self,
        *,
        channel: str,
        shard: tuple[int, int],
        login: Callable[[GatewaySession], Awaitable[TalonDiscordClient]],
        gate: ReceiveGate | None,
        on_change: Callable[[], None],
    ) -> None:
        self.channel = channel
        self.shard = shard
        self.label = "" if shard[1] == 1 else f"shard {shard[0]} of {shard[1]}"
        self._login = login
        self._gate = gate
        self._on_change = on_change
        self.state = "waiting" if gate is not None else "connecting"
        self.detail = ""
        self.client: TalonDiscordClient | None = None
        self._stopping = False

    def set_state(self, state: str, detail: str = "") -> None:
        """Mirror the client's connection state (``connected`` / ``reconnecting``)."""
        if self._stopping or self.state == "failed":
            return
        if state != self.state:
            log.info(
                "discord channel %s%s %s%s", self.channel, self._of(), state, f" ({detail})" if detail else ""
            )
        self.state, self.detail = state, detail
        self._on_change()

    async def run(self) -> None:
        """Receive until :meth:`close`, or until the session fails."""
        if self._gate is not None:
            await self._gate.wait()
            self.set_state("connecting")
        restarts = 0
        while not self._stopping:
            try:
                client = await self._login(self)
            except TokenRejectedError as exc:
                self._fail(str(exc))
                return
            except ConnectorStartError as exc:
                reason = str(exc)
            else:
                if self._stopping:
                    await client.close()
                    return
                self.client = client
                reason = await self._connect(client)
                if reason is None or self._stopping:
                    return
                self.set_state("reconnecting", reason)
                with contextlib.suppress(Exception):
                    await client.close()
            restarts += 1
            wait = _GATEWAY_RESTART.delay(restarts)
            log.warning(
                "discord channel %s%s: %s; reconnecting in %.1f s", self.channel, self._of(), reason, wait
            )
            await asyncio.sleep(wait)

    async def _connect(self, client: TalonDiscordClient) -> str | None:
        """Run discord.py's connect loop; why it ended, or None when nothing can restart it."""
        try:
            await client.connect(reconnect=True)
        except asyncio.CancelledError:
            raise
        except discord.PrivilegedIntentsRequired:
            self._fail(FATAL_CLOSE_CODES[4014])
            return None
        except discord.ConnectionClosed as exc:
            if exc.code in FATAL_CLOSE_CODES:
                self._fail(f"{FATAL_CLOSE_CODES[exc.code]} (close code {exc.code})")
                return None
            return f"gateway closed with code {exc.code}"
        except Exception as exc:
            return f"gateway failed: {exc!r}"
        return "gateway connection ended"

    async def close(self) -> None:
        """Stop receiving and close this session's client. Idempotent."""
        self._stopping = True
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()

    def _fail(self, detail: str) -> None:
        log.error("discord channel %s%s stopped: %s", self.channel, self._of(), detail)
        self.state, self.detail = "failed", detail
        self._on_change()

    def _of(self) -> str:
        return f" ({self.label})" if self.label else ""
