"""Persona-to-persona tasks (A2A) and background agent tasks.

Both run as ordinary turns of the durable queue on a thread of their own (channel
``a2a`` or ``background``), so the caller's thread is never blocked by its own
delegation and a restart simply runs an unfinished task again. When a task ends, its
result is posted into the originating thread as a system message and the queue gives
that thread's persona a turn on it, so a result is never lost because nobody polled.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from gateway import otel
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.personas import Persona
from gateway.queue import Batch
from gateway.store import delegation as tasks
from gateway.store.db import Database
from gateway.store.delegation import (
    A2A_CHANNEL,
    BACKGROUND_CHANNEL,
    TERMINAL,
    A2ATask,
    BackgroundTask,
    NewA2ATask,
    NewBackgroundTask,
    TaskKind,
    TaskLimitError,
)
from gateway.store.queue import cancel_pending
from gateway.store.threads import ThreadRow
from gateway.workspaces import shared_workspace

log = logging.getLogger("talon.delegation")

BACKGROUND_LABEL = "subagent.background"
MIN_BACKGROUND_MINUTES = 15


class DelegationError(RefusedError):
    """A refused delegation; the message says why and what to do instead."""


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
        self._app_settings = settings
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
        span_parent = otel.traceparent()  # the task's turns continue the caller's span

        def submit(conn: sqlite3.Connection) -> int:
            chain = [*tasks.task_chain(conn, caller_thread_id), caller]
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
            task = NewA2ATask(task_id, caller, caller_thread_id, target, message, chain, not await_reply)
            thread_id = tasks.open_task(
                conn, task, limit=self.settings.max_active_per_target, now=time.time()
            )
            otel.keep(conn, "thread", thread_id, span_parent)
            return thread_id

        done = self._done.setdefault(task_id, asyncio.Event())
        try:
            thread_id = await self.db.run_transaction(submit)
        except TaskLimitError as exc:
            raise DelegationError(
                f"{target!r} already has {exc.active} unfinished tasks (limit {exc.limit}); "
                "wait for one with persona_task_status, then try again"
            ) from None
        self.notify(thread_id)
        log.info("a2a task %s: %s -> %s", task_id, caller, target)
        if not await_reply:
            return {"task_id": task_id, "state": "submitted"}
        try:
            with self.park():
                async with asyncio.timeout(self.settings.await_timeout):
                    await done.wait()
        except TimeoutError:
            # From now on the result is delivered into the caller's thread when it comes.
            await self.db.run_transaction(tasks.deliver_later, task_id)
            task = await self._task(task_id)
            if task.state not in TERMINAL:
                return {
                    "task_id": task_id,
                    "state": "timeout",
                    "note": "the task goes on; its result will be posted into this conversation, "
                    "or poll it with persona_task_status",
                }
        return self._public(await self._task(task_id))

    async def status(self, *, task_id: str, caller_thread_id: int, wait_ms: float | None) -> dict[str, Any]:
        task = await self.db.read(tasks.a2a_task, task_id, caller_thread_id=caller_thread_id)
        if task is None:
            raise DelegationError(f"no task {task_id!r} was started from this conversation")
        if wait_ms and task.state not in TERMINAL:
            done = self._done.setdefault(task_id, asyncio.Event())
            try:
                with self.park():
                    async with asyncio.timeout(min(wait_ms / 1000, self.settings.await_timeout)):
                        await done.wait()
            except TimeoutError:
                pass
            task = await self._task(task_id)
        return self._public(task)

    async def _task(self, task_id: str) -> A2ATask:
        task = await self.db.read(tasks.a2a_task, task_id)
        assert task is not None  # tasks are never deleted while their thread exists
        return task

    @staticmethod
    def _public(task: A2ATask) -> dict[str, Any]:
        out = {"task_id": task.id, "state": task.state, "target_persona": task.target_persona}
        if task.result is not None:
            out["result"] = task.result
        if task.error:
            out["error"] = task.error
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
        with_task: Callable[[sqlite3.Connection, str], None] | None = None,
    ) -> dict[str, Any]:
        """Open a background task; ``with_task(conn, task_id)`` runs in the same transaction
        (a child agent's ``child_jobs`` row, so the task never exists without it)."""
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

        task = NewBackgroundTask(
            id=task_id,
            persona=persona,
            profile=profile,
            origin_thread_id=origin_thread_id,
            prompt=prompt,
            text=f"{prompt}\n\n[working directory: {workdir}]",
            provider=provider,
            working_directory=str(workdir),
            timeout_seconds=minutes * 60,
        )

        span_parent = otel.traceparent()  # the job's turns continue its starter's span, after a restart too

        def open_background(conn: sqlite3.Connection) -> int:
            limit = self.settings.background_concurrency
            thread_id = tasks.open_task(conn, task, limit=limit, now=time.time())
            otel.keep(conn, "thread", thread_id, span_parent)
            if with_task is not None:
                with_task(conn, task_id)
            return thread_id

        try:
            thread_id = await self.db.run_transaction(open_background)
        except TaskLimitError as exc:
            raise DelegationError(
                f"{exc.active} background tasks are already running (limit {exc.limit}); "
                "wait for one to finish or cancel one"
            ) from None
        self.notify(thread_id)
        return {"taskId": task_id, "state": "queued", "profile": profile, "timeoutMinutes": minutes}

    def _working_directory(self, profile: str, requested: str | None) -> Path:
        """The folder a background agent of ``profile`` works in: its shared workspace
        (``/shared``) or a folder inside it, checked after following links. Nothing outside
        it is handed out: ``<data_dir>/workspaces/<persona>`` holds every thread's workspace."""
        persona = self.personas[profile]
        shared = shared_workspace(self._app_settings, persona)
        shared.mkdir(parents=True, exist_ok=True)
        shared = shared.resolve()
        if not requested:
            return shared
        target = (shared / requested).resolve()
        if target != shared and shared not in target.parents:
            raise DelegationError(
                f"workingDirectory {requested!r} is outside the persona's workspace; "
                f"use a path relative to its shared workspace {shared}"
            )
        if not target.is_dir() and persona.shared_read_only:
            raise DelegationError(
                f"workingDirectory {requested!r} does not exist and the shared workspace {shared} "
                "is read-only; use a folder that exists in it"
            )
        target.mkdir(parents=True, exist_ok=True)
        return target

    async def background(self, task_id: str, origin_thread_id: int) -> BackgroundTask:
        task = await self.db.read(tasks.background_task, task_id, origin_thread_id)
        if task is None:
            raise DelegationError(f"no background task {task_id!r} was started from this conversation")
        return task

    async def cancel_background(self, task_id: str, origin_thread_id: int) -> dict[str, Any]:
        task = await self.background(task_id, origin_thread_id)
        if task.state in TERMINAL:
            return {"taskId": task_id, "state": task.state}

        def cancel(conn: sqlite3.Connection) -> bool:
            changed = tasks.cancel_background_task(conn, task_id, time.time())
            cancel_pending(conn, task.thread_id, time.time())
            return changed

        changed = await self.db.run_transaction(cancel)
        self.cancel_turn(task.thread_id)
        return {
            "taskId": task_id,
            "state": "canceled" if changed else (await self.background(task_id, origin_thread_id)).state,
        }

    # ------------------------------------------------------------ turn hooks

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        """A background session: its profile without ``background_agent`` (a session never
        spawns sessions of its own), the provider override, and the task's timeout."""
        if thread.channel != BACKGROUND_CHANNEL:
            return persona, None
        task = await self.db.read(tasks.background_task_of_thread, thread.id)
        labels = tuple(label for label in persona.capabilities if not label.startswith(BACKGROUND_LABEL))
        persona = replace(persona, capabilities=labels)
        if task is None:
            return persona, None
        if task.provider:
            persona = replace(persona, provider=task.provider)
        return persona, task.timeout_seconds

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None:
        kind = self._kind(thread)
        if kind:
            await self.db.run_transaction(tasks.mark_working, kind, thread.id, time.time())

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        kind = self._kind(thread)
        if kind is None:
            return
        state = {"completed": "completed", "failed": "failed", "canceled": "canceled"}[status]

        def finish(conn: sqlite3.Connection) -> tuple[str, int | None] | None:
            now = time.time()
            task = tasks.finish_task(
                conn, kind, thread.id, state=state, result=text or None, error=error, now=now
            )
            if task is None:
                return None
            origin = task.report_to
            if origin is None:
                return task.id, None
            tasks.post_message(conn, origin, "system", _result_notice(task, state, text, error), now)
            return task.id, origin

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
    def _kind(thread: ThreadRow) -> TaskKind | None:
        """Which kind of task runs in ``thread``, if any."""
        if thread.channel == A2A_CHANNEL:
            return "a2a"
        if thread.channel == BACKGROUND_CHANNEL:
            return "background"
        return None


def _result_notice(task: A2ATask | BackgroundTask, state: str, text: str, error: str | None) -> str:
    if isinstance(task, A2ATask):
        head = f"Task {task.id} delegated to {task.target_persona} {state}"
    else:
        head = f"Background task {task.id} ({task.profile}) {state}"
    body = text if state == "completed" else (error or "no result")
    return f"{head}:\n\n{body}"
