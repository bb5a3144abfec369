"""Chat commands: a message that is a command steers its thread instead of starting a turn.

The pipeline stores a command like any message (the transcript shows it) but queues no turn
for it; :class:`ChatCommands` then acts on it. Connectors strip a ``@botname`` suffix first.
The commands and their one-line summaries are :data:`gateway.command_table.CHAT_COMMANDS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from connectors.base import IntakeResult
from gateway.command_table import command_names, help_text
from gateway.store.db import Database
from gateway.store.threads import set_context_from

__all__ = ["COMMANDS", "Answer", "ChatCommands", "command_of"]

COMMANDS = command_names()


def command_of(text: str) -> str | None:
    """``/stop``, ``/new``, ... (connectors strip ``@botname``); anything else is a message."""
    word = text.strip().split(maxsplit=1)[0].lower() if text.strip() else ""
    return word if word in COMMANDS else None


@dataclass(frozen=True, slots=True)
class Answer:
    """What a command says back. ``in_thread=False``: nothing is posted into the thread (a
    stopped turn posts its own notice), though a native command's reply still shows ``text``."""

    text: str
    in_thread: bool = True


class ChatCommands:
    """Runs the chat commands.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        cancel (Callable[[:obj:`int`], :obj:`bool`]): Cancels a thread's running turn; False
            when none was running (:meth:`gateway.queue.TurnQueue.cancel`).
        notice (Callable[[:obj:`int`, :obj:`str`], Awaitable]): Posts a short gateway message
            into a thread.
        usage (Callable[[:obj:`int`, :obj:`int` | :obj:`None`], Awaitable[:obj:`str`]], optional):
            ``/usage``'s answer for a thread and the command's message
            (:func:`gateway.usage_report.usage_answer`).
    """

    def __init__(
        self,
        db: Database,
        *,
        cancel: Callable[[int], bool],
        notice: Callable[[int, str], Awaitable[object]],
        usage: Callable[[int, int | None], Awaitable[str]] | None = None,
    ):
        self.db = db
        self.cancel = cancel
        self.notice = notice
        self.usage = usage
        self._handlers: dict[str, Callable[[IntakeResult], Awaitable[Answer]]] = {
            "/stop": self._stop,
            "/new": self._new,
            "/help": self._help,
            "/usage": self._usage,
        }

    def handles(self, command: str) -> bool:
        return command in self._handlers

    async def run(self, command: str, result: IntakeResult, *, post: bool = True) -> str:
        """Act on ``command``, stored as ``result`` (a message on a thread); returns its answer.

        ``post=False`` when the connector shows the answer itself (a Slack slash command, a
        Discord application command): then nothing is posted into the thread.
        """
        assert result.thread_id is not None
        answer = await self._handlers[command](result)
        if post and answer.in_thread:
            await self.notice(result.thread_id, answer.text)
        return answer.text

    async def _stop(self, result: IntakeResult) -> Answer:
        assert result.thread_id is not None
        if self.cancel(result.thread_id):
            return Answer("Stopping the reply.", in_thread=False)
        return Answer("Nothing is running.")

    async def _new(self, result: IntakeResult) -> Answer:
        assert result.thread_id is not None and result.message_id is not None
        await self.db.run_transaction(set_context_from, result.thread_id, result.message_id)
        return Answer("Started a new conversation.")

    async def _help(self, result: IntakeResult) -> Answer:
        return Answer(help_text())

    async def _usage(self, result: IntakeResult) -> Answer:
        assert result.thread_id is not None
        if self.usage is None:
            return Answer("Usage is not recorded here.")
        return Answer(await self.usage(result.thread_id, result.message_id))
