"""Chat commands: a message that is a command steers its thread instead of starting a turn.

The pipeline stores a command like any message (the transcript shows it) but queues no turn
for it; :class:`ChatCommands` then acts on it. Connectors strip a ``@botname`` suffix first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from connectors.base import IntakeResult
from gateway.store.db import Database
from gateway.store.threads import set_context_from

__all__ = ["COMMANDS", "ChatCommands", "command_of"]

COMMANDS = frozenset({"/stop", "/new"})


def command_of(text: str) -> str | None:
    """``/stop`` and ``/new`` (connectors strip ``@botname``); anything else is a message."""
    word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return word if word in COMMANDS else None


class ChatCommands:
    """Runs the chat commands.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        cancel (Callable[[:obj:`int`], :obj:`bool`]): Cancels a thread's running turn; False
            when none was running (:meth:`gateway.queue.TurnQueue.cancel`).
        notice (Callable[[:obj:`int`, :obj:`str`], Awaitable]): Posts a short gateway message
            into a thread.
    """

    def __init__(
        self,
        db: Database,
        *,
        cancel: Callable[[int], bool],
        notice: Callable[[int, str], Awaitable[object]],
    ):
        self.db = db
        self.cancel = cancel
        self.notice = notice

    async def run(self, command: str, result: IntakeResult) -> None:
        """Act on ``command``, stored as ``result`` (a message on a thread)."""
        assert result.thread_id is not None
        if command == "/stop":
            if not self.cancel(result.thread_id):
                await self.notice(result.thread_id, "Nothing is running.")
        elif command == "/new":
            await self.db.run_transaction(set_context_from, result.thread_id, result.message_id)
            await self.notice(result.thread_id, "Started a new conversation.")
