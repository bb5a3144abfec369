"""The ``threads`` table: one row per conversation, keyed by its :class:`ThreadKey`.

:func:`key_of` and :func:`topic_value` are the one conversion between a ``ThreadKey`` and the
columns that hold it (``channel``, ``chat_id``, ``topic``; ``''`` when the chat itself is the
thread). Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from connectors.base import ChatType, ThreadKey

__all__ = [
    "SESSION_MARK",
    "ThreadRow",
    "ThreadSummary",
    "get_thread",
    "key_of",
    "recent_threads",
    "set_context_from",
    "set_summarized_upto",
    "topic_value",
    "upsert_thread",
]


# In the ``topic`` column, what follows this is a session: the sender whose own conversation
# the thread is (``session_scope: user``). Platform topics (forum topic ids, Slack ``ts``,
# Discord snowflakes) never hold it.
SESSION_MARK = "#user="


def key_of(channel: str, chat_id: str, topic: str) -> ThreadKey:
    """The ``ThreadKey`` stored in a row's ``channel``, ``chat_id`` and ``topic`` columns (the
    platform's place: a session mark is not part of it)."""
    return ThreadKey(channel, chat_id, topic.partition(SESSION_MARK)[0] or None)


def topic_value(key: ThreadKey, session: str | None = None) -> str:
    """What the ``topic`` column holds for ``key`` (and ``session``, one sender's conversation)."""
    return (key.topic or "") + (f"{SESSION_MARK}{session}" if session else "")


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One conversation.

    Attributes:
        id (:obj:`int`): The row id, ``thread_id`` everywhere else.
        persona (:obj:`str` | :obj:`None`): The bound persona; ``None`` while unrouted.
        context_from (:obj:`int`): The message id after which the current conversation starts (``/new``).
        summarized_upto (:obj:`int`): The last message id the thread's summary covers.
        topic (:obj:`str`): The ``topic`` column: the platform's sub-thread, then a session mark
            (:data:`SESSION_MARK` and the sender id) for one member's conversation in a group
            whose ``session_scope`` is ``user``.
    """

    id: int
    channel: str
    chat_id: str
    topic: str
    chat_type: str
    persona: str | None
    title: str | None
    context_from: int
    summarized_upto: int
    created_at: float
    updated_at: float

    @property
    def key(self) -> ThreadKey:
        return key_of(self.channel, self.chat_id, self.topic)

    @property
    def session(self) -> str | None:
        """The sender whose own conversation this is, or ``None`` for a shared one."""
        return self.topic.partition(SESSION_MARK)[2] or None


_COLUMNS = "id, channel, chat_id, topic, chat_type, persona, title, context_from, summarized_upto, created_at, updated_at"


def _thread(row: Any) -> ThreadRow:
    return ThreadRow(*row)


def upsert_thread(
    conn: sqlite3.Connection,
    key: ThreadKey,
    *,
    chat_type: ChatType | str,
    persona: str | None,
    now: float,
    rebind: bool = False,
    title: str | None = None,
    session: str | None = None,
) -> ThreadRow:
    """The thread of ``key``, created with ``chat_type``, ``persona`` and ``title`` when new.

    An existing thread is touched (``updated_at``) and keeps its chat type and title. It
    keeps its persona too, unless ``rebind`` (intake, which speaks for the platform): then a
    ``persona`` that is not ``None`` replaces it (intake resolves the bindings for every
    message, so a changed binding takes effect; no binding never unbinds a thread), and the
    chat type is the event's (a thread first made by a post into the chat had to guess it).
    ``session`` makes it the conversation of one sender in the chat (``session_scope: user``).
    """
    persona_update = "COALESCE(excluded.persona, threads.persona)" if rebind else "threads.persona"
    type_update = "excluded.chat_type" if rebind else "threads.chat_type"
    row = conn.execute(
        "INSERT INTO threads (channel, chat_id, topic, chat_type, persona, title, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, chat_id, topic) DO UPDATE SET "
        f"updated_at = excluded.updated_at, persona = {persona_update}, chat_type = {type_update} "
        f"RETURNING {_COLUMNS}",
        (key.channel, key.chat_id, topic_value(key, session), chat_type, persona, title, now, now),
    ).fetchone()
    return _thread(row)


def get_thread(conn: sqlite3.Connection, thread_id: int) -> ThreadRow | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return None if row is None else _thread(row)


def set_context_from(conn: sqlite3.Connection, thread_id: int, message_id: int) -> None:
    """``/new``: the thread's conversation starts after ``message_id``."""
    conn.execute("UPDATE threads SET context_from = ? WHERE id = ?", (message_id, thread_id))


def set_summarized_upto(conn: sqlite3.Connection, thread_id: int, message_id: int) -> None:
    """The thread's summary now covers the messages up to ``message_id``."""
    conn.execute("UPDATE threads SET summarized_upto = ? WHERE id = ?", (message_id, thread_id))


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """A thread as ``talon threads`` lists it."""

    id: int
    channel: str
    chat_id: str
    topic: str
    persona: str | None
    updated_at: float
    messages: int


def recent_threads(conn: sqlite3.Connection, limit: int) -> list[ThreadSummary]:
    """The ``limit`` most recently active threads, with their message counts."""
    rows = conn.execute(
        "SELECT t.id, t.channel, t.chat_id, t.topic, t.persona, t.updated_at, "
        "(SELECT COUNT(*) FROM messages m WHERE m.thread_id = t.id) AS n "
        "FROM threads t ORDER BY t.updated_at DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [ThreadSummary(*row) for row in rows]
