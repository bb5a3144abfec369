"""The transactions that end a turn: the reply committed with the batch's completion, a
spent budget's refusal, and the answer kept on its run when the reply could not be saved.

Each function runs inside :meth:`gateway.store.db.Database.run_transaction`: what it writes
commits together or not at all."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from connectors.base import RenderedChunk
from gateway import otel
from gateway.config import Settings
from gateway.live_reply import Preview, enqueue_reply
from gateway.outbox import ThreadAddress, enqueue_chunks, enqueue_files, next_pending
from gateway.personas import Persona
from gateway.queue import Batch, complete_in, keep_run_in
from gateway.runtime.agent import TurnResult
from gateway.spending import run_spend
from gateway.store.children import Payer
from gateway.store.messages import add_message
from gateway.store.runs import KeptAnswer, complete_run, end_run, keep_answer
from gateway.tracing import RunTrace

__all__ = [
    "Committed",
    "Reply",
    "commit_refusal",
    "commit_reply",
    "keep_answer_of",
    "not_saved_reason",
    "storable",
]

Committed = tuple[list[int], sqlite3.Row | None]
"""The outbox rows a commit added, and the thread's next row for the sender (None: none added)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A finished turn's reply, ready to commit."""

    batch: Batch
    address: ThreadAddress
    persona: Persona
    run_id: int
    result: TurnResult
    silent: bool  # nothing to say (or said already with channel_send): no message, no rows
    chunks: Sequence[RenderedChunk]
    spoken: Sequence[Any]  # the reply's voice message (gateway/voice/speaking.py)
    reply_to: str | None
    preview: Preview | None  # the streamed preview the reply replaces
    trace: RunTrace | None
    span_parent: str | None  # the turn's span, which its sends continue
    sender: str | None = None  # whom the run is counted for (TurnStart.sent_by)
    payer: Payer | None = None  # a background child's root turn's payer (TurnStart.payer)


def commit_reply(conn: sqlite3.Connection, reply: Reply, settings: Settings) -> Committed:
    """The assistant message, the reply's outbox rows (replacing its preview), the batch's
    completion and the run's usage and trace, in one transaction."""
    now = time.time()
    batch, run_id, result = reply.batch, reply.run_id, reply.result
    outbox_ids: list[int] = []
    otel.keep(conn, "run", run_id, reply.span_parent)
    if not reply.silent:
        message_id = add_message(
            conn,
            batch.thread_id,
            "assistant",
            result.text,
            created_at=now,
            persona=reply.persona.name,
            run_id=run_id,
            sort_key=_after(batch),
        )
        outbox_ids, after = enqueue_reply(
            conn,
            reply.address,
            reply.chunks,
            reply.preview,
            run_id=run_id,
            message_id=message_id,
            reply_to=reply.reply_to,
            now=now,
        )
        enqueue_files(
            conn, reply.address, reply.spoken, run_id=run_id, message_id=message_id, first_seq=after
        )
    complete_in(conn, batch, run_id)
    complete_run(
        conn,
        run_id,
        # A hook may have changed the provider since the run began, a fallback the model.
        model=result.model or reply.persona.model_ref,
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        model_calls=result.model_calls,
        now=now,
        spend=run_spend(
            settings,
            result,
            reply.persona,
            reply.address.key.channel,
            reply.sender,
            now,
            payer=reply.payer,
        ),
    )
    if reply.trace is not None:
        reply.trace.write(conn)
    return outbox_ids, next_pending(conn, batch.thread_id) if outbox_ids else None


def commit_refusal(
    conn: sqlite3.Connection,
    *,
    batch: Batch,
    address: ThreadAddress,
    run_id: int,
    chunks: Sequence[RenderedChunk],
    reply_to: str | None,
    why: str,
    span_parent: str | None,
) -> Committed:
    """A spent budget: the refusal posted, the batch completed (its messages stay stored) and
    the run ended ``refused``."""
    otel.keep(conn, "run", run_id, span_parent)
    ids = enqueue_chunks(conn, address, chunks, run_id=run_id, reply_to=reply_to) if chunks else []
    complete_in(conn, batch, run_id)
    end_run(conn, run_id, "refused", why, time.time())
    return ids, next_pending(conn, batch.thread_id) if ids else None


def keep_answer_of(
    conn: sqlite3.Connection, batch: Batch, run_id: int, result: TurnResult, error: str
) -> None:
    """The answer on its run, and the batch pointed at the run, so the retry commits it."""
    answer = KeptAnswer(
        result.text,
        result.tool_calls,
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.model_calls,
    )
    keep_answer(conn, run_id, answer, error=error, now=time.time())
    keep_run_in(conn, batch, run_id)


def not_saved_reason(exc: Exception) -> str:
    """What failed, in words for the chat (the log has the details)."""
    if isinstance(exc, sqlite3.Error):
        return "the database refused the write"
    if isinstance(exc, UnicodeError):
        return "its text could not be stored"
    return f"an internal error ({type(exc).__name__})"


def storable(text: str) -> str:
    """``text`` safe to store: an error message may quote what could not be encoded."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _after(batch: Batch) -> float | None:
    """The reply's place in the conversation: right after the last message it answers."""
    return max(batch.message_ids) + 0.5 if batch.message_ids else None
