"""Channels that recover: a start that failed for now is tried again, with backoff.

:class:`ChannelSupervisor` starts every channel. A channel whose start fails with a
transient :class:`connectors.base.ConnectorStartError` (the network is not up yet, the
platform answered 5xx or refused the connection), or with an error nobody classified, is
``retrying``: its health carries the last error and the time of the next attempt, which
``talon status`` shows. A refusal (a rejected token) leaves it ``failed`` with the reason,
never retried. A channel that ran and then reports ``failed`` with ``restartable`` set (its
platform library gave up) is stopped and started again the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from connectors.base import Connector, ConnectorStartError, IntakeHandler
from gateway.backoff import Backoff

__all__ = ["ChannelSupervisor"]

log = logging.getLogger("talon.channels")

# How often a running channel's health is looked at for a restartable failure.
_WATCH_INTERVAL = 1.0


class ChannelSupervisor:
    """Starts the channels and keeps them started.

    Args:
        connectors (Mapping[:obj:`str`, :class:`connectors.base.Connector`]): The channels by name.
        intake: Where the channels hand their events.
        backoff (:class:`gateway.backoff.Backoff`): Delays between the attempts of one channel
            (``channel_retry`` in talon.yaml).
        watch_interval (:obj:`float`, optional): Seconds between looks at a running channel.
    """

    def __init__(
        self,
        connectors: Mapping[str, Connector],
        intake: IntakeHandler,
        backoff: Backoff,
        *,
        watch_interval: float = _WATCH_INTERVAL,
    ):
        self.connectors = connectors
        self.intake = intake
        self.backoff = backoff
        self.watch_interval = watch_interval
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Make each channel's first attempt (all at once) and return when each has either
        started or failed once; retries go on in the background."""
        tried = [asyncio.Event() for _ in self.connectors]
        self._tasks = [
            asyncio.create_task(self._keep(connector, first), name=f"channel {name}")
            for (name, connector), first in zip(self.connectors.items(), tried, strict=True)
        ]
        await asyncio.gather(*(event.wait() for event in tried))

    async def stop(self) -> None:
        """Stop retrying and watching (the daemon stops the connectors themselves)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _keep(self, connector: Connector, tried: asyncio.Event) -> None:
        failures = 0
        while True:
            problem = await self._start_once(connector)
            tried.set()
            if problem is None:
                failures = 0
                problem = await self._until_gave_up(connector)
                with contextlib.suppress(Exception):
                    await connector.stop()
            elif not isinstance(problem, _Transient):
                connector.health.set("failed", str(problem))
                log.error("channel did not start and is not retried: %s", _named(connector, problem))
                return
            failures += 1
            delay = self.backoff.delay(failures)
            connector.health.set("retrying", str(problem), retry_at=time.time() + delay)
            log.warning(
                "channel %s; trying again in %.1f s (attempt %d)",
                _named(connector, problem),
                delay,
                failures + 1,
            )
            await asyncio.sleep(delay)
            connector.health.set("starting")

    async def _start_once(self, connector: Connector) -> str | None:
        """None when the channel started; else why not, as :class:`_Transient` when a later
        attempt may succeed."""
        try:
            await connector.start(self.intake)
        except ConnectorStartError as exc:
            return _Transient(str(exc)) if exc.transient else str(exc)
        except Exception as exc:
            # Not classified by the connector: most likely the network, so it is retried.
            log.exception("channel %s did not start", connector.name)
            return _Transient(f"{type(exc).__name__}: {exc}")
        log.info("channel %s started", connector.name)
        return None

    async def _until_gave_up(self, connector: Connector) -> str:
        """Waits while the channel runs; returns why its library gave up on it. A failure
        that is not restartable (a token revoked at run time) is left as it is."""
        while True:
            await asyncio.sleep(self.watch_interval)
            health = connector.health
            if health.state == "failed" and health.restartable:
                log.warning("channel %s stopped working (%s); restarting it", connector.name, health.detail)
                return _Transient(health.detail or "the channel stopped")


def _named(connector: Connector, problem: str) -> str:
    """``problem`` led by the channel's name (connectors' own messages already are)."""
    return problem if problem.startswith(f"{connector.name}:") else f"{connector.name}: {problem}"


class _Transient(str):
    """A reason to try again later."""
