"""Context summarization: long threads are folded into a ``summary`` memory item.

After a turn commits, :class:`Summarizer` runs :func:`maybe_summarize` for the thread in the
background (at most one at a time per thread). When the messages not yet summarized pass
``share`` of the context budget, the older ones go to ``session-summarizer``; its summary is
written to the thread's ``summary`` memory item and ``threads.summarized_upto`` moves to the
last summarized message, in one transaction. Later turns read the summary (system prompt)
plus only the messages after :func:`context_start`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from gateway.store.memory import put_item
from gateway.store.messages import MessageRow, messages_after
from gateway.store.queue import first_open_message
from gateway.store.threads import ThreadRow, get_thread, set_summarized_upto
from gateway.subagents.base import SubagentError, SubagentUnavailableError
from gateway.subagents.transcript import (
    MAX_INPUT_CHARS,
    SUMMARY_KEY,
    compose_summary,
    message_tokens,
    previous_summary,
    render_message,
    summarize_messages,
    thread_state,
)

if TYPE_CHECKING:
    from gateway.personas import Persona
    from gateway.store.db import Database
    from gateway.subagents.runner import SubagentRunner

__all__ = ["DEFAULT_SHARE", "SUMMARIZER", "Summarizer", "SummaryUpdate", "context_start", "maybe_summarize"]

log = logging.getLogger("talon.subagents.summarize")

SUMMARIZER = "session-summarizer"
DEFAULT_SHARE = 0.6
# The newest messages always stay verbatim, however long they are.
MIN_KEEP = 2
_MAX_ROWS = 5000


def context_start(thread: ThreadRow) -> int:
    """The message id after which a turn's transcript starts: ``/new`` or the summary, whichever is later."""
    return max(thread.context_from, thread.summarized_upto)


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """What one summarization did.

    Attributes:
        summarized_upto (:obj:`int`): The last message id now covered by the summary.
        messages (:obj:`int`): How many messages were folded in.
        summary (:obj:`str`): The text stored in the ``summary`` memory item.
    """

    summarized_upto: int
    messages: int
    summary: str


async def maybe_summarize(
    db: Database,
    runner: SubagentRunner,
    thread_id: int,
    persona: Persona,
    *,
    context_tokens: int,
    share: float = DEFAULT_SHARE,
) -> SummaryUpdate | None:
    """Summarize the older part of a thread when its transcript passes ``share`` of the budget.

    The newest messages worth half of the threshold (at least :data:`MIN_KEEP`) stay
    verbatim, as does any message still waiting in the queue.

    Args:
        db (:class:`~gateway.store.db.Database`): The daemon's database.
        runner (:class:`~gateway.subagents.runner.SubagentRunner`): Runs ``session-summarizer``.
        thread_id (:obj:`int`): The thread.
        persona (:class:`~gateway.personas.Persona`): The thread's persona (owner of the item).
        context_tokens (:obj:`int`): The transcript budget of a turn (``agent.context_tokens``).
        share (:obj:`float`, optional): Summarize above this fraction of the budget.

    Returns:
        :class:`SummaryUpdate` | :obj:`None`: ``None`` when nothing needed summarizing, or the
        thread changed (``/new``, another summary) while the model was working.

    Raises:
        :class:`~gateway.subagents.base.SubagentError`: The summarizer failed or is unavailable.
    """
    state = await thread_state(db, thread_id)
    start = max(state.context_from, state.summarized_upto)
    rows = await db.read(messages_after, thread_id, after=start, limit=_MAX_ROWS)
    costs = [message_tokens(r) for r in rows]
    threshold = context_tokens * share
    if sum(costs) <= threshold:
        return None
    older = _older_part(rows, costs, threshold / 2)
    pending = await db.read(first_open_message, thread_id)
    if pending is not None:
        older = [r for r in older if r.id < pending]
    if not older:
        return None
    call = runner.prepare(SUMMARIZER, persona=persona, thread_id=thread_id, db=db, check_persona=False)
    previous = await previous_summary(db, thread_id, state)
    ordered = sorted(older, key=lambda r: r.sort_key if r.sort_key is not None else r.id)
    result = await runner.execute(call, partial(summarize_messages, rows=ordered, previous=previous))
    text = compose_summary(result.data)
    marker = older[-1].id

    def commit(conn: sqlite3.Connection) -> bool:
        now_row = get_thread(conn, thread_id)
        if now_row is None or (now_row.context_from, now_row.summarized_upto) != (
            state.context_from,
            state.summarized_upto,
        ):
            return False  # /new or another summary happened meanwhile: this one is stale
        now = time.time()
        put_item(conn, thread_id, persona.name, SUMMARY_KEY, "summary", text, now)
        set_summarized_upto(conn, thread_id, marker)
        return True

    if not await db.run_transaction(commit):
        return None
    log.info("thread %s: summarized %d messages (up to message %d)", thread_id, len(older), marker)
    return SummaryUpdate(marker, len(older), text)


def _older_part(rows: list[MessageRow], costs: list[int], keep_tokens: float) -> list[MessageRow]:
    """The prefix (by id) to summarize: all but the newest ``keep_tokens`` worth, capped in size."""
    split = len(rows)
    kept = 0
    while split > 0 and (len(rows) - split < MIN_KEEP or kept + costs[split - 1] <= keep_tokens):
        split -= 1
        kept += costs[split]
    older: list[MessageRow] = []
    size = 0
    for row in rows[:split]:
        size += len(render_message(row)) + 2
        if older and size > MAX_INPUT_CHARS:
            break  # the rest is folded in by a later call
        older.append(row)
    return older


class Summarizer:
    """Runs :func:`maybe_summarize` after turns, in the background, one at a time per thread.

    A request for a thread that is being summarized is remembered and served right after.

    Args:
        db (:class:`~gateway.store.db.Database`): The daemon's database.
        runner (:class:`~gateway.subagents.runner.SubagentRunner`): Runs ``session-summarizer``.
        context_tokens (:obj:`int`): ``agent.context_tokens``.
        share (:obj:`float`, optional): ``subagents.summarize_share``.
    """

    def __init__(
        self, db: Database, runner: SubagentRunner, *, context_tokens: int, share: float = DEFAULT_SHARE
    ):
        self.db = db
        self.runner = runner
        self.context_tokens = context_tokens
        self.share = share
        self._running: dict[int, asyncio.Task[None]] = {}
        self._again: dict[int, Persona] = {}
        self._warned: set[str] = set()

    @property
    def threshold(self) -> float:
        """Transcript tokens above which a thread is worth checking."""
        return self.context_tokens * self.share

    def schedule(self, thread_id: int, persona: Persona) -> None:
        """Check the thread soon; returns at once."""
        if thread_id in self._running:
            self._again[thread_id] = persona
            return
        self._running[thread_id] = asyncio.create_task(
            self._run(thread_id, persona), name=f"summarize-thread-{thread_id}"
        )

    async def _run(self, thread_id: int, persona: Persona) -> None:
        try:
            while True:
                await self._once(thread_id, persona)
                if thread_id not in self._again:
                    return
                persona = self._again.pop(thread_id)
        finally:
            self._running.pop(thread_id, None)

    async def _once(self, thread_id: int, persona: Persona) -> None:
        try:
            await maybe_summarize(
                self.db, self.runner, thread_id, persona, context_tokens=self.context_tokens, share=self.share
            )
        except SubagentUnavailableError as exc:
            if str(exc) not in self._warned:  # once per reason: it fails the same way every turn
                self._warned.add(str(exc))
                log.warning("long threads are not summarized: %s", exc)
        except SubagentError as exc:
            log.warning("thread %s: summarization failed: %s", thread_id, exc)
        except Exception:
            log.exception("thread %s: summarization failed", thread_id)

    async def wait_idle(self) -> None:
        """Wait until no summarization is running."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel running summarizations (a canceled one writes nothing)."""
        self._again.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
