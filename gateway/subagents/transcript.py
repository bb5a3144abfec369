"""The ``session-summarizer`` built-in: a thread's transcript -> ``{summary, key_facts, open_threads}``.

Context summarization (:mod:`gateway.subagents.summarize`) and ``subagent_invoke`` share
it. Only the thread's own messages after its ``context_from`` (``/new``) are read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.runtime.context import estimate_tokens
from gateway.store.memory import get_item
from gateway.store.messages import MessageRow, newest_messages
from gateway.store.threads import ThreadRow, get_thread
from gateway.subagents.base import Invocation, SubagentError, SubagentResult

if TYPE_CHECKING:
    from gateway.store.db import Database

__all__ = ["MAX_INPUT_CHARS", "compose_summary", "render_message", "summarize_messages", "summarize_thread"]

# What one summarizer call may read (about 100k tokens); older text beyond it waits for a later call.
MAX_INPUT_CHARS = 400_000
_NEWEST = 2000  # messages looked at, newest first, to fill MAX_INPUT_CHARS
SUMMARY_KEY = "summary"


def render_message(row: MessageRow) -> str:
    """One message as a transcript line: ``[speaker] text``."""
    role, text = row.role, row.text
    if role == "assistant":
        return f"[assistant] {text}"
    if role == "system":
        return f"[system] {text}"
    if row.attachments:
        names = ", ".join(a.get("name", "?") for a in json.loads(row.attachments))
        text += f"\n[attachments: {names}]"
    name = row.sender_name
    return f"[user {name}] {text}" if name else f"[user] {text}"


def message_tokens(row: MessageRow) -> int:
    return estimate_tokens(render_message(row))


async def thread_state(db: Database, thread_id: int) -> ThreadRow:
    """The thread, for its ``context_from`` and ``summarized_upto``."""
    row = await db.read(get_thread, thread_id)
    if row is None:
        raise SubagentError(f"thread {thread_id} does not exist")
    return row


async def previous_summary(db: Database, thread_id: int, state: ThreadRow) -> str | None:
    """The thread's summary item, when it covers the current conversation (not one before /new)."""
    if state.summarized_upto <= state.context_from:
        return None
    item = await db.read(get_item, thread_id, SUMMARY_KEY)
    return item.value if item else None


def compose_summary(data: dict[str, Any]) -> str:
    """The summarizer's JSON as the Markdown text stored in the ``summary`` memory item."""
    parts = [_summary_text(data)]
    if data.get("key_facts"):
        parts.append("Key facts:\n" + "\n".join(f"- {f}" for f in data["key_facts"]))
    if data.get("open_threads"):
        parts.append("Open threads:\n" + "\n".join(f"- {t}" for t in data["open_threads"]))
    return "\n\n".join(parts)


async def summarize_messages(
    call: Invocation, rows: Sequence[MessageRow], previous: str | None
) -> SubagentResult:
    """Summarize ``rows`` (oldest first) on top of ``previous``."""
    lines = [render_message(r) for r in rows]
    focus = call.input.get("focus")
    if focus is not None and not isinstance(focus, str):
        raise SubagentError("input.focus must be text")
    content = (
        (f"Focus on: {focus.strip()}\n\n" if focus and focus.strip() else "")
        + ("Earlier summary:\n" + previous + "\n\n" if previous else "There is no earlier summary.\n\n")
        + "Messages:\n"
        + "\n\n".join(lines)
    )
    outcome = await call.complete(content)
    return call.result(_summary_text(outcome.data), outcome.data)


def _summary_text(data: Any) -> str:
    """``data["summary"]``; a replacement definition whose schema dropped it fails clearly."""
    summary = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(summary, str) or not summary.strip():
        raise SubagentError(
            "session-summarizer returned no summary text; its output_schema must require 'summary'"
        )
    return summary.strip()


async def summarize_thread(call: Invocation) -> SubagentResult:
    """``subagent_invoke`` on ``session-summarizer``: the thread's conversation, summarized.

    Reads the current summary and the messages after it (the newest that fit
    :data:`MAX_INPUT_CHARS`). Writes nothing.

    Input: ``focus`` (optional text).
    Data: ``{"summary": str, "key_facts": [str], "open_threads": [str]}``.
    """
    state = await thread_state(call.db, call.thread_id)
    start = max(state.context_from, state.summarized_upto)
    rows = await call.db.read(newest_messages, call.thread_id, after=start, limit=_NEWEST)
    picked: list[MessageRow] = []
    size = 0
    for row in rows:
        size += len(render_message(row)) + 2
        if picked and size > MAX_INPUT_CHARS:
            break
        picked.append(row)
    picked.reverse()
    previous = await previous_summary(call.db, call.thread_id, state)
    if not picked and not previous:
        empty = {"summary": "The conversation has no messages yet.", "key_facts": [], "open_threads": []}
        return call.result(empty["summary"], empty)
    return await summarize_messages(call, picked, previous)
