"""What happens around a scheduled run: its attempts in the history, its notification.

:class:`ScheduleHook` follows the turns of agent schedules (a :class:`gateway.turn_seams.TurnHooks`):
each attempt's start is recorded with its attempt number, and when the turn is over the end of
the reply is kept as the run's output tail and the notification policy is applied.
:class:`ScheduleNotifier` posts through :class:`gateway.poster.ChannelPoster`, the one way to
post. Shell schedules are run by the scheduler itself with a :class:`ShellRunner` the daemon
wires (the sandbox belongs to the workspace tools); they report a :class:`ShellOutcome`.

Notifications (``notify_on``): ``failure`` (default) posts when an occurrence failed for good,
``always`` also after a success, ``never`` posts nothing. The target is ``notify_chat``
(``channel`` = its home chat, or ``channel:chat``) or else the schedule's own thread. An agent
run's reply already lands in its own thread, so a success notice goes out only to another chat.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gateway.errors import RefusedError
from gateway.store import schedules
from gateway.store.db import Database
from gateway.store.schedules import ScheduleRow

if TYPE_CHECKING:
    from gateway.personas import Persona
    from gateway.poster import ChannelPoster
    from gateway.store.queue import Batch
    from gateway.store.threads import ThreadRow

__all__ = [
    "OUTPUT_TAIL_CHARS",
    "ScheduleHook",
    "ScheduleNotifier",
    "ShellOutcome",
    "ShellRunner",
    "split_target",
    "tail",
]

log = logging.getLogger("talon.scheduler")

OUTPUT_TAIL_CHARS = 2000
_NOTICE_TAIL_CHARS = 1500


def tail(text: str | None, limit: int = OUTPUT_TAIL_CHARS) -> str | None:
    """The last ``limit`` characters of ``text`` (marked when cut), or None for nothing."""
    if not text:
        return None
    return text if len(text) <= limit else "…" + text[-limit:]


def split_target(target: str) -> tuple[str, str | None]:
    """``channel`` or ``channel:chat`` as (channel, chat or None)."""
    channel, _, chat = target.partition(":")
    return channel, chat or None


@dataclass(frozen=True, slots=True)
class ShellOutcome:
    """How a shell schedule's command ended.

    Attributes:
        exit_code (:obj:`int` | :obj:`None`): None when it was killed (time or output limit)
            or never started.
        error (:obj:`str` | :obj:`None`): Why it failed other than by its exit status.
    """

    exit_code: int | None
    duration_ms: int
    output: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0


class ShellRunner(Protocol):
    async def __call__(self, row: ScheduleRow) -> ShellOutcome: ...


class ScheduleNotifier:
    """Posts a schedule's notification, as its ``notify_on`` and ``notify_chat`` say."""

    def __init__(self, poster: ChannelPoster) -> None:
        self.poster = poster

    async def after_run(self, row: ScheduleRow, *, ok: bool, summary: str, output: str | None) -> None:
        """Notify about one finished occurrence; a failure to post is logged, never raised."""
        if row.notify_on == "never" or (ok and row.notify_on != "always"):
            return
        own_thread = row.notify_chat is None
        if ok and own_thread and row.executor == "agent":
            return  # the reply itself is in the thread
        name = row.label or row.task_id
        text = f"Scheduled task «{name}» {summary}"
        shown = tail(output, _NOTICE_TAIL_CHARS)
        if shown:
            fence = "~~~~" if "```" in shown else "```"
            text += f"\n\n{fence}\n{shown}\n{fence}"
        try:
            if row.notify_chat is None:
                await self.poster.notice(row.thread_id, text)
            else:
                channel, chat = split_target(row.notify_chat)
                await self.poster.notify(channel, chat, text)
        except (RefusedError, LookupError) as exc:
            log.warning("schedule %s: notification not posted: %s", row.id, exc)


class ScheduleHook:
    """Follows scheduled turns: attempts, output tails, notifications (see the module docstring)."""

    def __init__(self, db: Database, notifier: ScheduleNotifier | None) -> None:
        self.db = db
        self.notifier = notifier

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        return persona, None

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None:
        for schedule_id, due_at in _occurrences(batch):
            await self.db.run_transaction(
                schedules.attempt_started, schedule_id, due_at, batch.attempts, run_id, time.time()
            )

    async def retrying(self, batch: Batch, error: str, delay: float) -> None:
        """The queue's ``on_retry``: the attempt failed for now; the next starts in ``delay`` s."""
        for schedule_id, due_at in _occurrences(batch):
            await self.db.run_transaction(
                schedules.record_result,
                schedule_id,
                due_at,
                status="retrying",
                run_id=None,
                error=f"{error} (next attempt in {delay:.0f} s)",
                now=time.time(),
            )

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        for schedule_id, due_at in _occurrences(batch):
            output = tail(text)
            if output:
                await self.db.run_transaction(
                    schedules.record_result,
                    schedule_id,
                    due_at,
                    status=status,
                    run_id=None,
                    error=error,
                    now=time.time(),
                    output_tail=output,
                )
            row = await self.db.read(schedules.get_schedule, schedule_id)
            if row is None or self.notifier is None:
                continue
            attempts = f" after {batch.attempts} attempts" if batch.attempts > 1 else ""
            summary = "ran: ok" + attempts if status == "completed" else f"{status}{attempts}: {error or '-'}"
            await self.notifier.after_run(row, ok=status == "completed", summary=summary, output=text)


def _occurrences(batch: Batch) -> list[tuple[str, float]]:
    return [
        (item.payload["schedule_id"], float(item.payload.get("due_at", 0.0)))
        for item in batch.items
        if item.kind == "schedule" and "schedule_id" in item.payload
    ]
