"""What a turn starts from, read and recorded in its lease's transaction: the thread, its
summary and recent messages, the run row (or the run an earlier attempt kept or suspended),
who sent the batch, and the spans it continues."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gateway import otel
from gateway.personas import Persona
from gateway.queue import Batch
from gateway.runtime.agent import TurnResult
from gateway.runtime.checkpoints import Suspended, from_state
from gateway.runtime.context import transcript_rows
from gateway.runtime.model import Usage
from gateway.store.children import Payer, job_payer
from gateway.store.delegation import BACKGROUND_CHANNEL
from gateway.store.interactions import load_checkpoint
from gateway.store.memory import list_items
from gateway.store.messages import NO_SENDERS, BatchSenders, MessageRow, batch_senders, platform_message_id
from gateway.store.previews import PreviewRow, open_previews
from gateway.store.runs import resume_kept, start_run
from gateway.store.threads import ThreadRow, get_thread
from gateway.subagents.summarize import context_start

__all__ = ["TurnStart", "begin_turn", "load_context"]


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What :func:`begin_turn` read and recorded in the lease's transaction."""

    thread: ThreadRow
    summary: str | None
    rows: list[MessageRow]
    persona: Persona | None  # None: the thread's persona is not configured (and no run began)
    run_id: int | None
    reply_to: str | None  # the platform message a group reply answers
    kept: TurnResult | None = None  # the answer an earlier attempt kept: commit it, don't ask the model
    sent_by: BatchSenders = NO_SENDERS  # who sent the batch's messages
    resume: Suspended | None = None  # where an earlier attempt was suspended, waiting for a human
    trace_parents: tuple[str, ...] = ()  # the spans this turn continues (its messages' intake)
    payer: Payer | None = None  # a background child's turn counts for its root turn's payer
    previews: tuple[PreviewRow, ...] = ()  # left open in the chat by an interrupted attempt

    @property
    def sender_id(self) -> str | None:
        """The one sender the batch's messages are from, if one."""
        return self.sent_by.sole

    @property
    def senders(self) -> tuple[str, ...]:
        """Every sender of the batch's messages (their roles narrow the turn)."""
        return self.sent_by.every

    def budget_subjects(self, persona: str) -> tuple[str, str, tuple[str, ...]]:
        """The persona, channel and senders whose budgets this turn is checked and counted against."""
        if self.payer is None:
            return persona, self.thread.channel, self.senders
        return self.payer.persona or persona, self.payer.channel or "", self.payer.senders


def begin_turn(conn: sqlite3.Connection, batch: Batch, personas: Mapping[str, Persona]) -> TurnStart:
    """The turn's context and its ``runs`` row, in the lease's transaction."""
    upto = max(batch.message_ids) if batch.message_ids else None
    thread, summary, rows = load_context(batch.thread_id, upto, conn)
    persona = personas.get(thread.persona or "")
    if persona is None:
        return TurnStart(thread, summary, rows, None, run_id=None, reply_to=None)
    kept = _resume_kept(conn, batch.kept_run) if batch.kept_run is not None else None
    state = load_checkpoint(conn, batch.kept_run) if batch.kept_run is not None and kept is None else None
    if kept is not None or state is not None:
        run_id = batch.kept_run
    else:
        run_id = start_run(conn, batch.thread_id, persona.name, persona.model_ref, time.time())
    reply_to = None
    if upto is not None and thread.chat_type != "dm":  # in groups, reply to the trigger
        reply_to = platform_message_id(conn, upto)
    # A background child's turn has no messages' spans: it continues the span that started it.
    parents = otel.parents(conn, "message", batch.message_ids) or otel.parents(
        conn, "thread", [batch.thread_id]
    )
    return TurnStart(
        thread,
        summary,
        rows,
        persona,
        run_id,
        reply_to,
        kept,
        batch_senders(conn, batch.message_ids),
        from_state(state) if state is not None else None,
        tuple(parents),
        job_payer(conn, batch.thread_id) if thread.channel == BACKGROUND_CHANNEL else None,
        tuple(open_previews(conn, batch.thread_id)),
    )


def load_context(
    thread_id: int, upto_message_id: int | None, conn: sqlite3.Connection
) -> tuple[ThreadRow, str | None, list[MessageRow]]:
    """One snapshot for a turn: the thread, its latest summary, its recent messages."""
    thread = get_thread(conn, thread_id)
    if thread is None:
        raise LookupError(f"thread {thread_id} vanished")
    summary = list_items(conn, thread_id, limit=1, kind="summary")
    rows = transcript_rows(
        conn, thread_id, context_from=context_start(thread), upto_message_id=upto_message_id
    )
    return thread, summary[0].value if summary else None, rows


def _resume_kept(conn: sqlite3.Connection, run_id: int) -> TurnResult | None:
    """The answer ``run_id`` kept when its reply failed to commit; the run is running again."""
    kept = resume_kept(conn, run_id)
    if kept is None:
        return None
    return TurnResult(
        text=kept.text,
        usage=Usage(kept.input_tokens, kept.output_tokens),
        model_calls=kept.model_calls,
        tool_calls=kept.tool_calls,
    )
