"""The working indicator: bots cannot type in Slack, so a reaction (``eyes`` by default) shows
on the message that triggered the turn while the turn runs."""

from __future__ import annotations

import logging
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from connectors.base import ThreadKey
from connectors.slack.errors import api_error_code
from connectors.slack.memory import KeyedLocks, Recent

log = logging.getLogger("talon.slack")

_HARMLESS_REACTION_ERRORS = frozenset({"already_reacted", "no_reaction", "message_not_found"})


class WorkingReactions:
    """Adds the reaction when a thread starts working and removes it when it stops.

    Only a message this process saw trigger the turn gets the reaction (:meth:`triggered`);
    without one (a scheduled run, a turn resumed after a restart) nothing is marked.

    Args:
        web: gives the Web API client (None before the connector started).
        reaction: the reaction's name.
        channel: the Talon channel's name, for log lines.
    """

    def __init__(self, web: Callable[[], AsyncWebClient | None], reaction: str, channel: str) -> None:
        self._web = web
        self._reaction = reaction
        self._channel = channel
        self._triggers: Recent[ThreadKey, str] = Recent(4096)
        self._locks: KeyedLocks[ThreadKey] = KeyedLocks()
        self._reacted: dict[ThreadKey, str] = {}

    def triggered(self, thread: ThreadKey, ts: str) -> None:
        """The message ``ts`` asked for the thread's next turn."""
        self._triggers.put(thread, ts)

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        """Add (or remove) the reaction; a failure is logged and otherwise ignored."""
        try:
            async with self._locks.hold(thread):
                if working:
                    await self._react(thread)
                else:
                    await self._unreact(thread)
        except Exception as exc:
            log.debug("working indicator failed: %s", type(exc).__name__, extra={"channel": self._channel})

    async def _react(self, thread: ThreadKey) -> None:
        if self._web() is None or thread in self._reacted:
            return
        ts = self._triggers.get(thread)
        if ts is None:
            return
        self._reacted[thread] = ts
        await self._call("reactions.add", thread.chat_id, ts)

    async def _unreact(self, thread: ThreadKey) -> None:
        ts = self._reacted.pop(thread, None)
        if ts is None or self._web() is None:
            return
        await self._call("reactions.remove", thread.chat_id, ts)

    async def _call(self, method: str, channel: str, ts: str) -> None:
        web = self._web()
        assert web is not None
        try:
            await web.api_call(method, json={"channel": channel, "timestamp": ts, "name": self._reaction})
        except SlackApiError as err:
            if api_error_code(err) not in _HARMLESS_REACTION_ERRORS:
                raise
