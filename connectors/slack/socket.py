"""Socket Mode transport: slack_sdk's aiohttp ``SocketModeClient`` with backed-off reconnects.

The SDK client reconnects by itself (on a close frame, a stale ping or Slack's
``disconnect`` message) by asking ``apps.connections.open`` for a new websocket URL. This
subclass spaces those requests out with capped, jittered exponential backoff while they
keep failing, and reports the connection state so the connector can surface it in
``health``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient


@dataclass(slots=True)
class Backoff:
    """Delays between failing attempts: ``base * 2**n`` capped at ``cap``, times 0.5-1.0."""

    base: float = 1.0
    cap: float = 60.0
    failures: int = 0

    def next_delay(self) -> float:
        if self.failures == 0:
            return 0.0
        raw = min(self.cap, self.base * 2 ** (self.failures - 1))
        return raw * random.uniform(0.5, 1.0)

    def failed(self) -> None:
        self.failures += 1

    def reset(self) -> None:
        self.failures = 0


class BackoffSocketModeClient(SocketModeClient):
    """A ``SocketModeClient`` whose reconnect attempts back off while they fail.

    Args:
        backoff: the delay policy, shared across reconnects; reset by a successful open.
        on_problem: called with a short reason (no secrets) whenever an attempt fails.
        **kwargs: passed to :class:`slack_sdk.socket_mode.aiohttp.SocketModeClient`.
    """

    def __init__(self, *, backoff: Backoff, on_problem: Callable[[str], None], **kwargs: Any):
        super().__init__(**kwargs)
        self._backoff = backoff
        self._on_problem = on_problem

    async def issue_new_wss_url(self) -> str:
        delay = self._backoff.next_delay()
        if delay:
            await asyncio.sleep(delay)
        try:
            url = await super().issue_new_wss_url()
        except Exception as exc:
            self._backoff.failed()
            self._on_problem(f"apps.connections.open failed: {type(exc).__name__}: {_short(exc)}")
            raise
        self._backoff.reset()
        return url


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200]
