"""The ``a2a_tasks`` and ``background_tasks`` tables: delegated work on a thread of its own.

A persona-to-persona (A2A) task is ``submitted``, then ``working`` while the target persona's
turn runs; a background task is ``queued``, then ``running``. Both end ``completed``,
``failed`` or ``canceled``. Each task runs in a thread whose key is its channel (``a2a`` or
``background``) and its id, so a task is found from the turn that works on it.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from typing import Any, Literal

from connectors.base import ThreadKey
from gateway.errors import RefusedError
from gateway.store.messages import Role, add_message
from gateway.store.queue import enqueue_message
from gateway.store.threads import upsert_thread

__all__ = [
    "A2A_CHANNEL",
    "BACKGROUND_CHANNEL",
    "TERMINAL",
    "A2ATask",
    "BackgroundTask",
    "NewA2ATask",
    "NewBackgroundTask",
    "TaskKind",
    "TaskLimitError",
    "a2a_task",
    "background_task",
    "background_task_of_thread",
    "background_tasks_from",
    "cancel_background_task",
    "deliver_later",
    "finish_task",
    "mark_working",
    "open_task",
    "post_message",
    "task_chain",
]

A2A_CHANNEL = "a2a"
BACKGROUND_CHANNEL = "background"
TERMINAL = frozenset({"completed", "failed", "canceled"})

TaskKind = Literal["a2a", "background"]
"""Which table a task is in; also the channel of the threads its tasks run in."""


class TaskLimitError(RefusedError):
    """``active`` unfinished tasks already count against the ``limit``; nothing was created."""

    def __init__(self, active: int, limit: int):
        super().__init__(f"{active} unfinished tasks (limit {limit})")
        self.active = active
        self.limit = limit


@dataclass(frozen=True, slots=True)
class NewA2ATask:
    """A task for the ``target`` persona from ``caller``, asked in ``caller_thread_id``.

    Attributes:
        chain (:obj:`list[str]`): The personas that delegated so far, the first caller first.
        deliver (:obj:`bool`): Post the result into the caller's thread (the caller does not wait).
    """

    id: str
    caller: str
    caller_thread_id: int
    target: str
    message: str
    chain: list[str]
    deliver: bool


@dataclass(frozen=True, slots=True)
class NewBackgroundTask:
    """A background session of ``profile``, spawned by ``persona`` from ``origin_thread_id``.

    Attributes:
        text (:obj:`str`): The first message of the task's thread: the prompt and its context.
    """

    id: str
    persona: str
    profile: str
    origin_thread_id: int
    prompt: str
    text: str
    provider: str | None
    working_directory: str
    timeout_seconds: float


@dataclass(frozen=True, slots=True)
class A2ATask:
    """One A2A task; its turns run in ``target_thread_id``."""

    id: str
    caller_persona: str
    caller_thread_id: int
    target_persona: str
    target_thread_id: int
    message: str
    state: str
    result: str | None
    error: str | None
    chain: list[str]
    deliver: bool
    created_at: float
    updated_at: float

    @property
    def report_to(self) -> int | None:
        """The thread its result is posted into; ``None`` while the caller waits for it."""
        return self.caller_thread_id if self.deliver else None


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """One background task; its turns run in ``thread_id``."""

    id: str
    persona: str
    profile: str
    origin_thread_id: int
    thread_id: int
    prompt: str
    provider: str | None
    working_directory: str | None
    timeout_seconds: float
    state: str
    result: str | None
    error: str | None
    created_at: float
    updated_at: float

    @property
    def report_to(self) -> int:
        """The thread its result is posted into: always the one it was spawned from."""
        return self.origin_thread_id


_A2A_COLUMNS = (
    "id, caller_persona, caller_thread_id, target_persona, target_thread_id, message, state, result, "
    "error, chain, deliver, created_at, updated_at"
)
_BACKGROUND_COLUMNS = (
    "id, persona, profile, origin_thread_id, thread_id, prompt, provider, working_directory, "
    "timeout_seconds, state, result, error, created_at, updated_at"
)


def _a2a(row: Any) -> A2ATask:
    values = tuple(row)
    return A2ATask(*values[:9], json.loads(values[9]), bool(values[10]), *values[11:])


def _background(row: Any) -> BackgroundTask:
    return BackgroundTask(*row)


def post_message(
    conn: sqlite3.Connection, thread_id: int, role: Role, text: str, now: float, *, sender: str | None = None
) -> int:
    """A message in the thread plus the queue item that gives its persona a turn on it;
    returns the message id. ``sender`` is the persona that wrote it, if one did."""
    message_id = add_message(
        conn,
        thread_id,
        role,
        text,
        created_at=now,
        sender_id=f"persona:{sender}" if sender else None,
        sender_name=sender,
    )
    enqueue_message(conn, thread_id, message_id, available_at=now, now=now)
    return message_id


def _unfinished(conn: sqlite3.Connection, task: NewA2ATask | NewBackgroundTask) -> int:
    """What counts against the limit: the target's unfinished A2A tasks, or every unfinished
    background task."""
    if isinstance(task, NewA2ATask):
        row = conn.execute(
            "SELECT COUNT(*) FROM a2a_tasks WHERE target_persona = ? AND state IN ('submitted', 'working')",
            (task.target,),
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT COUNT(*) FROM background_tasks WHERE state IN ('queued', 'running')"
        ).fetchone()
    return int(row[0])


def _insert(
    conn: sqlite3.Connection, task: NewA2ATask | NewBackgroundTask, thread_id: int, now: float
) -> None:
    if isinstance(task, NewA2ATask):
        conn.execute(
            "INSERT INTO a2a_tasks (id, caller_persona, caller_thread_id, target_persona, target_thread_id, "
            "message, chain, deliver, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task.id,
                task.caller,
                task.caller_thread_id,
                task.target,
                thread_id,
                task.message,
                json.dumps(task.chain),
                1 if task.deliver else 0,
                now,
                now,
            ),
        )
    else:
        conn.execute(
            "INSERT INTO background_tasks (id, persona, profile, origin_thread_id, thread_id, prompt, provider, "
            "working_directory, timeout_seconds, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task.id,
                task.persona,
                task.profile,
                task.origin_thread_id,
                thread_id,
                task.prompt,
                task.provider,
                task.working_directory,
                task.timeout_seconds,
                now,
                now,
            ),
        )


def open_task(
    conn: sqlite3.Connection, task: NewA2ATask | NewBackgroundTask, *, limit: int, now: float
) -> int:
    """Create ``task`` with a thread of its own and the first message of that thread, queued
    for a turn of the persona that runs it; returns the thread id.

    Raises:
        TaskLimitError: ``limit`` tasks are unfinished already (the target's A2A tasks, or
            all background tasks); nothing is created.
    """
    active = _unfinished(conn, task)
    if active >= limit:
        raise TaskLimitError(active, limit)
    if isinstance(task, NewA2ATask):
        channel, runner, text, sender = A2A_CHANNEL, task.target, task.message, task.caller
    else:
        channel, runner, text, sender = BACKGROUND_CHANNEL, task.profile, task.text, task.persona
    thread = upsert_thread(
        conn,
        ThreadKey(channel, task.id),
        chat_type="dm",
        persona=runner,
        now=now,
        title=f"{channel} task {task.id}",
    )
    _insert(conn, task, thread.id, now)
    post_message(conn, thread.id, "user", text, now, sender=sender)
    return thread.id


def task_chain(conn: sqlite3.Connection, thread_id: int) -> list[str]:
    """The chain of the A2A task that runs in ``thread_id``; empty for any other thread."""
    row = conn.execute("SELECT chain FROM a2a_tasks WHERE target_thread_id = ?", (thread_id,)).fetchone()
    return list(json.loads(row[0])) if row else []


def a2a_task(
    conn: sqlite3.Connection, task_id: str, *, caller_thread_id: int | None = None
) -> A2ATask | None:
    """One A2A task; with ``caller_thread_id`` only if it was asked from that thread."""
    if caller_thread_id is None:
        row = conn.execute(f"SELECT {_A2A_COLUMNS} FROM a2a_tasks WHERE id = ?", (task_id,)).fetchone()
    else:
        row = conn.execute(
            f"SELECT {_A2A_COLUMNS} FROM a2a_tasks WHERE id = ? AND caller_thread_id = ?",
            (task_id, caller_thread_id),
        ).fetchone()
    return None if row is None else _a2a(row)


def deliver_later(conn: sqlite3.Connection, task_id: str) -> None:
    """The caller stopped waiting: an unfinished task's result is posted into its thread."""
    conn.execute(
        "UPDATE a2a_tasks SET deliver = 1 WHERE id = ? AND state NOT IN ('completed', 'failed', 'canceled')",
        (task_id,),
    )


def background_task(conn: sqlite3.Connection, task_id: str, origin_thread_id: int) -> BackgroundTask | None:
    """One background task, if it was spawned from ``origin_thread_id``."""
    row = conn.execute(
        f"SELECT {_BACKGROUND_COLUMNS} FROM background_tasks WHERE id = ? AND origin_thread_id = ?",
        (task_id, origin_thread_id),
    ).fetchone()
    return None if row is None else _background(row)


def background_tasks_from(
    conn: sqlite3.Connection, origin_thread_id: int, *, limit: int
) -> list[BackgroundTask]:
    """The newest background tasks spawned from ``origin_thread_id``, newest first."""
    rows = conn.execute(
        f"SELECT {_BACKGROUND_COLUMNS} FROM background_tasks WHERE origin_thread_id = ? "
        "ORDER BY created_at DESC, id LIMIT ?",
        (origin_thread_id, limit),
    ).fetchall()
    return [_background(row) for row in rows]


def background_task_of_thread(conn: sqlite3.Connection, thread_id: int) -> BackgroundTask | None:
    """The background task that runs in ``thread_id``."""
    row = conn.execute(
        f"SELECT {_BACKGROUND_COLUMNS} FROM background_tasks WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return None if row is None else _background(row)


def cancel_background_task(conn: sqlite3.Connection, task_id: str, now: float) -> bool:
    """An unfinished background task is ``canceled``; False when it had finished."""
    cursor = conn.execute(
        "UPDATE background_tasks SET state = 'canceled', updated_at = ? WHERE id = ? "
        "AND state IN ('queued', 'running')",
        (now, task_id),
    )
    return cursor.rowcount > 0


def mark_working(conn: sqlite3.Connection, kind: TaskKind, thread_id: int, now: float) -> None:
    """A turn started on the task of ``thread_id``: a new task is ``working`` (A2A) or ``running``."""
    if kind == "a2a":
        conn.execute(
            "UPDATE a2a_tasks SET state = 'working', updated_at = ? WHERE target_thread_id = ? "
            "AND state = 'submitted'",
            (now, thread_id),
        )
    else:
        conn.execute(
            "UPDATE background_tasks SET state = 'running', updated_at = ? WHERE thread_id = ? AND state = 'queued'",
            (now, thread_id),
        )


def finish_task(
    conn: sqlite3.Connection,
    kind: TaskKind,
    thread_id: int,
    *,
    state: str,
    result: str | None,
    error: str | None,
    now: float,
) -> A2ATask | BackgroundTask | None:
    """The task of ``thread_id`` ends in ``state``; returns it as it is now, or None when there
    is none or it had ended already."""
    task: A2ATask | BackgroundTask | None
    if kind == "a2a":
        row = conn.execute(
            f"SELECT {_A2A_COLUMNS} FROM a2a_tasks WHERE target_thread_id = ?", (thread_id,)
        ).fetchone()
        task = None if row is None else _a2a(row)
    else:
        task = background_task_of_thread(conn, thread_id)
    if task is None or task.state in TERMINAL:
        return None
    table = "a2a_tasks" if kind == "a2a" else "background_tasks"
    conn.execute(
        f"UPDATE {table} SET state = ?, result = ?, error = ?, updated_at = ? WHERE id = ?",
        (state, result, error, now, task.id),
    )
    return replace(task, state=state, result=result, error=error, updated_at=now)
