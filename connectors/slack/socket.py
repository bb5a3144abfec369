"""Socket Mode transport: slack_sdk's aiohttp ``SocketModeClient`` with backed-off reconnects.

The SDK client reconnects by itself (on a close frame, a stale ping or Slack's
``disconnect`` message) by asking ``apps.connections.open`` for a new websocket URL. This
subclass spaces those requests out with capped, jittered exponential backoff while they
keep failing, and reports the connection state so the connector can surface it in
``health``. It also decodes each message with the bounded JSON decoder: a malformed,
oversized or deeply nested one is skipped with a warning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient

from gateway.backoff import Backoff
from gateway.jsonsafe import JSONInputError, loads

# An event is a few kilobytes; the same cap holds over Socket Mode and HTTP.
MAX_EVENT_BYTES = 1 << 20

DEFAULT_RECONNECT = Backoff(base=1.0, max=60.0)


@dataclass(slots=True)
class ReconnectBackoff:
    """Delays between reconnect attempts: none after a successful open, then ``policy``'s
    delay for the number of opens that failed in a row."""

    policy: Backoff
    failures: int = 0

    def next_delay(self) -> float:
        return self.policy.delay(self.failures) if self.failures else 0.0

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

    def __init__(self, *, backoff: ReconnectBackoff, on_problem: Callable[[str], None], **kwargs: Any):
        super().__init__(**kwargs)
        self._backoff = backoff
        self._on_problem = on_problem
        self._listening: set[asyncio.Future[None]] = set()

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

    async def process_message(self) -> None:
        """Decode the next queued message and hand it to the listeners, as the SDK does,
        but with :func:`gateway.jsonsafe.loads` instead of an unbounded ``json.loads``."""
        raw = await self.message_queue.get()
        if raw is None:
            return
        try:
            message = loads(raw, max_bytes=MAX_EVENT_BYTES) if raw.startswith("{") else {}
        except JSONInputError as exc:
            # Its envelope id is unreadable, so it cannot be acked: Slack redelivers it.
            self.logger.warning("skipped a Socket Mode message: %s", exc)
            return
        # Listeners run concurrently, as in the SDK: a slow one never holds up the next message.
        listening = asyncio.ensure_future(self.run_message_listeners(message, raw))
        self._listening.add(listening)
        listening.add_done_callback(self._listening.discard)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200]
