"""Persona-to-persona tasks (A2A) and background agent tasks.

Both run as ordinary turns of the durable queue on a thread of their own (channel
``a2a`` or ``background``), so the caller's thread is never blocked by its own
delegation and a restart simply runs an unfinished task again. When a task ends, its
result is posted into the originating thread as a system message and the queue gives
that thread's persona a turn on it, so a result is never lost because nobody polled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from connectors.base import ThreadKey
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.personas import Persona
from gateway.queue import Batch
from gateway.store.db import Database
from gateway.store.messages import Role, add_message
from gateway.store.queue import enqueue_message
from gateway.store.threads import ThreadRow, upsert_thread

log = logging.getLogger("talon.delegation")

A2A_CHANNEL = "a2a"
BACKGROUND_CHANNEL = "background"
TERMINAL = frozenset({"completed", "failed", "canceled"})
BACKGROUND_LABEL = "subagent.background"
MIN_BACKGROUND_MINUTES = 15


class DelegationError(RefusedError):
    """A refused delegation; the message says why and what to do instead."""


def _new_thread(conn: sqlite3.Connection, channel: str, task_id: str, persona: str, now: float) -> int:
    thread = upsert_thread(
        conn,
        ThreadKey(channel, task_id),
        chat_type="dm",
        persona=persona,
        now=now,
        title=f"{channel} task {task_id}",
    )
    return thread.id


def _queue_message(
    conn: sqlite3.Connection, thread_id: int, role: Role, text: str, now: float, *, sender: str | None = None
) -> int:
    """A message plus the queue item that gives the thread's persona a turn on it."""
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


class Delegation:
    """The A2A and background task service; also the turn runner's hooks for their threads."""

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        personas: Mapping[str, Persona],
        notify: Callable[[int], None],
        park: Callable[[], AbstractContextManager[None]],
        cancel_turn: Callable[[int], bool],
    ):
        self.db = db
        self.settings = settings.delegation
        self.data_path = settings.data_path
        self.personas = personas
        self.notify = notify
        self.park = park
        self.cancel_turn = cancel_turn
        self._done: dict[str, asyncio.Event] = {}

    # ------------------------------------------------------------ A2A

    def cards(self, caller: str) -> list[dict[str, Any]]:
        return [p.card() for name, p in sorted(self.personas.items()) if name != caller]

    async def send(
        self, *, caller: str, caller_thread_id: int, target: str, message: str, await_reply: bool
    ) -> dict[str, Any]:
        if target not in self.personas:
            names = ", ".join(n for n in self.personas if n != caller) or "none"
            raise DelegationError(f"no persona named {target!r}; call persona_list (available: {names})")
        if not message.strip():
            raise DelegationError("message is empty; say what the target persona should do")
        task_id = uuid.uuid4().hex[:16]

        def submit(conn: sqlite3.Connection) -> int:
            parent = conn.execute(
                "SELECT chain FROM a2a_tasks WHERE target_thread_id = ?", (caller_thread_id,)
            ).fetchone()
            chain = [*json.loads(parent["chain"]), caller] if parent else [caller]
            if target in chain:
                raise DelegationError(
                    f"refused: delegating to {target!r} would form a cycle ({' -> '.join([*chain, target])}); "
                    "answer yourself or ask a persona outside this chain"
                )
            if len(chain) > self.settings.max_hops:
                raise DelegationError(
                    f"refused: delegation depth {len(chain)} exceeds the limit of {self.settings.max_hops} hops "
                    f"({' -> '.join(chain)}); answer with what you have"
                )
            (active,) = conn.execute(
                "SELECT COUNT(*) FROM a2a_tasks WHERE target_persona = ? AND state IN ('submitted', 'working')",
                (target,),
            ).fetchone()
            if active >= self.settings.max_active_per_target:
                raise DelegationError(
                    f"{target!r} already has {active} unfinished tasks (limit {self.settings.max_active_per_target}); "
                    "wait for one with persona_task_status, then try again"
                )
            now = time.time()
            thread_id = _new_thread(conn, A2A_CHANNEL, task_id, target, now)
            conn.execute(
                "INSERT INTO a2a_tasks (id, caller_persona, caller_thread_id, target_persona, target_thread_id, "
                "message, chain, deliver, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    caller,
                    caller_thread_id,
                    target,
                    thread_id,
                    message,
                    json.dumps(chain),
                    0 if await_reply else 1,
                    now,
                    now,
                ),
            )
            _queue_message(conn, thread_id, "user", message, now, sender=caller)
            return thread_id

        done = self._done.setdefault(task_id, asyncio.Event())
        thread_id = await self.db.run_transaction(submit)
        self.notify(thread_id)
        log.info("a2a task %s: %s -> %s", task_id, caller, target)
        if not await_reply:
            return {"task_id": task_id, "state": "submitted"}
        try:
            with self.park():
                await asyncio.wait_for(done.wait(), self.settings.await_timeout)
        except TimeoutError:
            # From now on the result is delivered into the caller's thread when it comes.
            await self.db.execute(
                "UPDATE a2a_tasks SET deliver = 1 WHERE id = ? AND state NOT IN "
                "('completed', 'failed', 'canceled')",
                (task_id,),
            )
            task = await self._task(task_id)
            if task["state"] not in TERMINAL:
                return {
                    "task_id": task_id,
                    "state": "timeout",
                    "note": "the task goes on; its result will be posted into this conversation, "
                    "or poll it with persona_task_status",
                }
        return self._public(await self._task(task_id))

    async def status(self, *, task_id: str, caller_thread_id: int, wait_ms: float | None) -> dict[str, Any]:
        task = await self.db.fetchone(
            "SELECT * FROM a2a_tasks WHERE id = ? AND caller_thread_id = ?", (task_id, caller_thread_id)
        )
        if task is None:
            raise DelegationError(f"no task {task_id!r} was started from this conversation")
        if wait_ms and task["state"] not in TERMINAL:
            done = self._done.setdefault(task_id, asyncio.Event())
            try:
                with self.park():
                    await asyncio.wait_for(done.wait(), min(wait_ms / 1000, self.settings.await_timeout))
            except TimeoutError:
                pass
            task = await self._task(task_id)
        return self._public(task)

    async def _task(self, task_id: str) -> Any:
        return await self.db.fetchone("SELECT * FROM a2a_tasks WHERE id = ?", (task_id,))

    @staticmethod
    def _public(task: Any) -> dict[str, Any]:
        out = {"task_id": task["id"], "state": task["state"], "target_persona": task["target_persona"]}
        if task["result"] is not None:
            out["result"] = task["result"]
        if task["error"]:
            out["error"] = task["error"]
        return out

    # ------------------------------------------------------------ background agents

    def profiles(self) -> list[dict[str, Any]]:
        return [p.card() for _, p in sorted(self.personas.items())]

    async def spawn(
        self,
        *,
        persona: str,
        origin_thread_id: int,
        prompt: str,
        profile: str | None,
        provider: str | None,
        working_directory: str | None,
        timeout_minutes: float | None,
        providers: Mapping[str, Any],
    ) -> dict[str, Any]:
        profile = profile or persona
        if profile not in self.personas:
            raise DelegationError(f"no profile {profile!r}; call background_agent with action 'profiles'")
        if provider is not None and provider not in providers:
            raise DelegationError(f"no provider {provider!r}; configured: {', '.join(providers)}")
        if not prompt.strip():
            raise DelegationError("prompt is required for spawn")
        workdir = self._working_directory(profile, working_directory)
        minutes = max(MIN_BACKGROUND_MINUTES, timeout_minutes or self.settings.background_timeout_minutes)
        task_id = uuid.uuid4().hex[:16]

        def submit(conn: sqlite3.Connection) -> int:
            (running,) = conn.execute(
                "SELECT COUNT(*) FROM background_tasks WHERE state IN ('queued', 'running')"
            ).fetchone()
            if running >= self.settings.background_concurrency:
                raise DelegationError(
                    f"{running} background tasks are already running (limit {self.settings.background_concurrency}); "
                    "wait for one to finish or cancel one"
                )
            now = time.time()
            thread_id = _new_thread(conn, BACKGROUND_CHANNEL, task_id, profile, now)
            conn.execute(
                "INSERT INTO background_tasks (id, persona, profile, origin_thread_id, thread_id, prompt, provider, "
                "working_directory, timeout_seconds, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    persona,
                    profile,
                    origin_thread_id,
                    thread_id,
                    prompt,
                    provider,
                    str(workdir),
                    minutes * 60,
                    now,
                    now,
                ),
            )
            text = f"{prompt}\n\n[working directory: {workdir}]"
            _queue_message(conn, thread_id, "user", text, now, sender=persona)
            return thread_id

        thread_id = await self.db.run_transaction(submit)
        self.notify(thread_id)
        return {"taskId": task_id, "state": "queued", "profile": profile, "timeoutMinutes": minutes}

    def _working_directory(self, profile: str, requested: str | None) -> Path:
        workspace = (self.data_path / "workspaces" / profile).resolve()
        workspace.mkdir(parents=True, exist_ok=True)
        if not requested:
            return workspace
        target = (workspace / requested).resolve()
        if target != workspace and workspace not in target.parents:
            raise DelegationError(
                f"workingDirectory {requested!r} is outside the persona's workspace; use a path inside {workspace}"
            )
        target.mkdir(parents=True, exist_ok=True)
        return target

    async def background(self, task_id: str, origin_thread_id: int) -> Any:
        task = await self.db.fetchone(
            "SELECT * FROM background_tasks WHERE id = ? AND origin_thread_id = ?",
            (task_id, origin_thread_id),
        )
        if task is None:
            raise DelegationError(f"no background task {task_id!r} was started from this conversation")
        return task

    async def cancel_background(self, task_id: str, origin_thread_id: int) -> dict[str, Any]:
        task = await self.background(task_id, origin_thread_id)
        if task["state"] in TERMINAL:
            return {"taskId": task_id, "state": task["state"]}
        changed = await self.db.execute(
            "UPDATE background_tasks SET state = 'canceled', updated_at = ? WHERE id = ? AND state IN ('queued', 'running')",
            (time.time(), task_id),
        )
        await self.db.execute(
            "UPDATE queue_items SET status = 'canceled', updated_at = ? WHERE thread_id = ? AND status = 'pending'",
            (time.time(), task["thread_id"]),
        )
        self.cancel_turn(task["thread_id"])
        return {
            "taskId": task_id,
            "state": "canceled" if changed else (await self.background(task_id, origin_thread_id))["state"],
        }

    # ------------------------------------------------------------ turn hooks

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        """A background session: its profile without ``background_agent`` (a session never
        spawns sessions of its own), the provider override, and the task's timeout."""
        if thread.channel != BACKGROUND_CHANNEL:
            return persona, None
        task = await self.db.fetchone(
            "SELECT provider, timeout_seconds FROM background_tasks WHERE thread_id = ?", (thread.id,)
        )
        labels = tuple(label for label in persona.capabilities if not label.startswith(BACKGROUND_LABEL))
        persona = replace(persona, capabilities=labels)
        if task is None:
            return persona, None
        if task["provider"]:
            persona = replace(persona, provider=task["provider"])
        return persona, task["timeout_seconds"]

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None:
        table = self._table(thread)
        if table:
            await self.db.execute(
                f"UPDATE {table} SET state = ?, updated_at = ? WHERE {self._thread_col(table)} = ? "
                "AND state IN ('submitted', 'queued')",
                ("working" if table == "a2a_tasks" else "running", time.time(), thread.id),
            )

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        table = self._table(thread)
        if table is None:
            return
        state = {"completed": "completed", "failed": "failed", "canceled": "canceled"}[status]
        col = self._thread_col(table)

        def finish(conn: sqlite3.Connection) -> tuple[str, int | None] | None:
            task = conn.execute(f"SELECT * FROM {table} WHERE {col} = ?", (thread.id,)).fetchone()
            if task is None or task["state"] in TERMINAL:
                return None
            now = time.time()
            conn.execute(
                f"UPDATE {table} SET state = ?, result = ?, error = ?, updated_at = ? WHERE id = ?",
                (state, text or None, error, now, task["id"]),
            )
            origin, deliver = (
                (task["caller_thread_id"], task["deliver"])
                if table == "a2a_tasks"
                else (task["origin_thread_id"], 1)
            )
            if not deliver:
                return task["id"], None
            _queue_message(conn, origin, "system", _result_notice(table, task, state, text, error), now)
            return task["id"], origin

        outcome = await self.db.run_transaction(finish)
        if outcome is None:
            return
        task_id, origin = outcome
        if origin is not None:
            self.notify(origin)
        event = self._done.pop(task_id, None)
        if event:
            event.set()

    @staticmethod
    def _table(thread: ThreadRow) -> str | None:
        return {A2A_CHANNEL: "a2a_tasks", BACKGROUND_CHANNEL: "background_tasks"}.get(thread.channel)

    @staticmethod
    def _thread_col(table: str) -> str:
        return "target_thread_id" if table == "a2a_tasks" else "thread_id"


def _result_notice(table: str, task: Any, state: str, text: str, error: str | None) -> str:
    if table == "a2a_tasks":
        head = f"Task {task['id']} delegated to {task['target_persona']} {state}"
    else:
        head = f"Background task {task['id']} ({task['profile']}) {state}"
    body = text if state == "completed" else (error or "no result")
    return f"{head}:\n\n{body}"
