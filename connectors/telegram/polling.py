"""Long polling with acknowledgement after commit.

PTB's ``Updater`` confirms updates before a handler has run; this loop moves the
``getUpdates`` offset past an update only after the gateway's intake returned for it,
so a crash or an intake failure means Telegram delivers the update again.

A fetched batch is handled chat by chat, every chat at once and each chat's updates in order:
taken one after another, a bot's intake ran at the pace of one commit (about 36 updates/s of
a burst on a PostgreSQL cluster node, bench/bench_cluster.py), however many chats waited.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from connectors.base import ConnectorHealth
from connectors.telegram.api import ALLOWED_UPDATES, TelegramBot, TelegramTuning, redact
from connectors.telegram.sending import retry_after_seconds

log = logging.getLogger("talon.connectors.telegram")

UpdateHandler = Callable[[dict[str, Any]], Awaitable[None]]
"""Processes one raw update; raising means "not committed, deliver it again"."""


def chat_of(raw: dict[str, Any]) -> int | None:
    """The chat an update belongs to (its updates are handled in order), or None for an update
    of no chat or of an unknown shape (those are handled in order among themselves)."""
    for key, value in raw.items():
        if key == "update_id" or not isinstance(value, dict):
            continue
        holder = value.get("message") if key == "callback_query" else value
        chat = holder.get("chat") if isinstance(holder, dict) else None
        chat_id = chat.get("id") if isinstance(chat, dict) else None
        return chat_id if isinstance(chat_id, int) else None
    return None


def silence_limit(poll_timeout: int, watchdog_seconds: float) -> float:
    """How long a ``getUpdates`` call may stay unanswered before the poller is rebuilt.

    A long poll legitimately lasts ``poll_timeout`` seconds; a watchdog shorter than that
    counts from the end of the poll window instead of firing on every idle poll.
    """
    return watchdog_seconds if watchdog_seconds > poll_timeout else poll_timeout + watchdog_seconds


class Poller:
    """Runs ``getUpdates`` in a background task and hands each update to ``handle``.

    Args:
        name: the channel name (for logs and health).
        make_bot: builds a client with a fresh HTTP session (called again by the watchdog).
        handle: processes one update; the offset advances past it only when this returns.
        health: updated with connected / reconnecting / failed.
        poll_timeout: the long-poll seconds sent to Telegram.
        watchdog_seconds: see :func:`silence_limit`.
        tuning: backoff timings.
    """

    def __init__(
        self,
        *,
        name: str,
        make_bot: Callable[[], TelegramBot],
        handle: UpdateHandler,
        health: ConnectorHealth,
        poll_timeout: int,
        watchdog_seconds: float,
        tuning: TelegramTuning,
    ) -> None:
        self._name = name
        self._make_bot = make_bot
        self._handle = handle
        self._health = health
        self._poll_timeout = poll_timeout
        self._limit = silence_limit(poll_timeout, watchdog_seconds)
        self._tuning = tuning
        self._offset: int | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def offset(self) -> int | None:
        """The next update id to ask for: everything below it is acknowledged."""
        return self._offset

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"telegram poller {self._name}")
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A poll loop that died of an error no retry here covers: the channel is restarted."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("%s: the update poller stopped", self._name, exc_info=exc)
        self._health.set(
            "failed", f"the update poller stopped: {type(exc).__name__}: {exc}", restartable=True
        )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        bot = self._make_bot()
        poll_failures = 0
        intake_failures = 0
        try:
            while True:
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation
                    # that lands as the poll returns, and stop() would wait on this loop forever.
                    async with asyncio.timeout(self._limit):
                        updates = await bot.get_raw_updates(self._offset, self._poll_timeout, ALLOWED_UPDATES)
                except TimeoutError:
                    log.warning(
                        "%s: getUpdates silent for %.0f s; opening a new connection", self._name, self._limit
                    )
                    self._health.set(
                        "reconnecting", f"getUpdates silent for {self._limit:.0f} s; reconnecting"
                    )
                    await bot.close()
                    bot = self._make_bot()
                    continue
                except Exception as exc:
                    poll_failures += 1
                    delay = await self._poll_failed(bot, exc, poll_failures)
                    await asyncio.sleep(delay)
                    continue
                poll_failures = 0
                self._health.set("connected")
                if await self._process(updates):
                    intake_failures = 0
                else:
                    intake_failures += 1
                    await asyncio.sleep(self._tuning.backoff.delay(intake_failures))
        finally:
            await bot.close()

    async def _process(self, updates: list[dict[str, Any]]) -> bool:
        """Handle a batch: each chat's updates in order, the chats side by side (intake commits
        are grouped, and a slow download holds up its own chat only). False when an intake
        failed: the offset stops before the first failed update, and the rest is fetched again
        (updates already committed come back as duplicates, which intake drops)."""
        lanes: dict[int | None, list[tuple[int, dict[str, Any]]]] = {}
        for raw in updates:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int):
                log.warning("%s: skipping an update without an update_id", self._name)
                continue
            if self._offset is not None and update_id < self._offset:
                continue
            lanes.setdefault(chat_of(raw), []).append((update_id, raw))
        if not lanes:
            return True
        failed = await asyncio.gather(*(self._handle_lane(lane) for lane in lanes.values()))
        first_failed = min((update_id for update_id in failed if update_id is not None), default=None)
        if first_failed is not None:
            self._offset = first_failed
            return False
        self._offset = max(update_id for lane in lanes.values() for update_id, _ in lane) + 1
        return True

    async def _handle_lane(self, lane: list[tuple[int, dict[str, Any]]]) -> int | None:
        """One chat's updates in order; the id of the one whose intake failed, after which the
        rest wait for the next fetch."""
        for update_id, raw in lane:
            try:
                await self._handle(raw)
            except Exception:
                log.exception(
                    "%s: intake failed for update %s; it will be delivered again", self._name, update_id
                )
                return update_id
        return None

    async def _poll_failed(self, bot: TelegramBot, exc: Exception, failures: int) -> float:
        """Record why getUpdates failed; returns the delay before the next attempt."""
        delay = self._tuning.backoff.delay(failures)
        reason = redact(str(exc), bot.token) or type(exc).__name__
        if isinstance(exc, RetryAfter):
            delay = retry_after_seconds(exc)
            self._health.set("reconnecting", f"flood control on getUpdates; waiting {delay:.0f} s")
        elif isinstance(exc, Conflict) and "webhook" in reason.lower():
            self._health.set("reconnecting", "a webhook is set for this bot; removing it to use long polling")
            with contextlib.suppress(TelegramError):
                await bot.delete_webhook()
        elif isinstance(exc, Conflict):
            self._health.set(
                "reconnecting",
                "409 Conflict: another process is polling with this bot token; stop the other instance",
            )
        elif isinstance(exc, InvalidToken):
            delay = self._tuning.backoff.max
            self._health.set("failed", "Telegram rejected the bot token; check the token in talon.yaml")
        elif isinstance(exc, TelegramError):
            self._health.set("reconnecting", f"getUpdates failed: {reason}")
        else:
            log.exception("%s: unexpected getUpdates failure", self._name)
            self._health.set("reconnecting", f"getUpdates failed: {type(exc).__name__}: {reason}")
        log.warning("%s: %s (retry in %.1f s)", self._name, self._health.detail, delay)
        return delay
