"""The child-agent service: foreground children in process, background children on the queue.

- A **foreground** child (``agent`` in foreground mode, a ``compose`` node) runs its own agent
  loop inside the calling tool: a ``runs`` row of its own (recorded in ``child_runs`` with its
  parent and root), a bridge identity holding only its narrowed labels at its depth, and a
  budget whose tool-round limit is the child's ``max_tool_use_iterations`` (the loop winds
  down with one last call whose tools are not run). Its usage is charged to the root run's
  budget when it ends.
- A **background** child is a background task of :class:`gateway.delegation.Delegation`: it
  runs as ordinary durable-queue turns on a thread of its own, a restart runs it again, and
  its result is posted into the calling thread through the delegation's notice path. Its
  ``child_jobs`` row, written in the task's transaction, keeps the narrowed labels and
  options, which this service applies to each of its turns (:meth:`Children.prepare`).

The service is a turn hook (after the delegation's) and tells the host tools the lineage of
a background child's thread (:meth:`lineage_of`), so its identity carries depth and root.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from gateway import otel
from gateway.children.plan import ChildOutcome, ChildPlan, Lineage
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.events import EventBus
from gateway.findings import findings_prompt
from gateway.personas import Persona
from gateway.queue import Batch
from gateway.runtime.agent import ToolBox, run_agent
from gateway.runtime.context import ChannelInfo, system_prompt
from gateway.runtime.model import ChatMessage, ModelProvider, Usage
from gateway.spending import Spending, run_spend
from gateway.store import children as store
from gateway.store.db import Database
from gateway.store.delegation import BACKGROUND_CHANNEL, background_task_of_thread
from gateway.store.runs import RunSpend, complete_run, end_run, start_run
from gateway.store.threads import ThreadRow
from gateway.tracing import NULL_TRACE, RunTrace

if TYPE_CHECKING:
    from gateway.budgets import RunBudget
    from gateway.delegation import Delegation

__all__ = ["ChildTools", "Children"]

log = logging.getLogger("talon.children")

# Progress events a foreground child's result carries (the last ones).
PROGRESS_KEPT = store.PROGRESS_RING


class ChildTools(Protocol):
    """What the service needs of the host tools (:class:`gateway.host_tools.HostTools`)."""

    def toolbox(
        self,
        persona: Persona,
        thread_id: int,
        run_id: int,
        *,
        sender_id: str | None = None,
        budget: RunBudget | None = None,
        depth: int = 0,
        root_run_id: int | None = None,
        trace: RunTrace | None = None,
    ) -> ToolBox: ...

    def instructions(self, persona: Persona) -> Sequence[str]: ...

    def release(self, run_id: int) -> None: ...


class Children:
    """Runs child agents for the ``agent`` and ``compose`` tools.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        settings (:class:`gateway.config.Settings`): The daemon's settings.
        providers (Mapping[:obj:`str`, :class:`gateway.runtime.model.ModelProvider`]): By name.
        delegation (:class:`gateway.delegation.Delegation`): Background children are its tasks.
    """

    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        providers: Mapping[str, ModelProvider],
        delegation: Delegation,
        bus: EventBus | None = None,
    ):
        self.db = db
        self.bus = bus  # a foreground child's emit_progress reaches its parent's live reply here
        self.settings = settings
        self.providers = providers
        self.delegation = delegation
        self.tools: ChildTools | None = None
        self.spending = Spending(db, settings)  # the root turn's budgets, checked before a child
        self._channels = [ChannelInfo(c.name, c.type, c.home_chat) for c in settings.channels]
        self._background: dict[int, tuple[store.ChildJob, Lineage]] = {}  # by thread id, while a turn runs
        self._progress: dict[int, list[dict[str, Any]]] = {}  # by foreground child run id
        self._progress_threads: dict[int, int] = {}  # the thread each of those children works for

    def attach(self, tools: ChildTools) -> None:
        """The host tools, built after this service (they hold it among their services)."""
        self.tools = tools

    @property
    def max_depth(self) -> int:
        return self.settings.delegation.max_child_depth

    # ------------------------------------------------------------ foreground

    async def run(
        self,
        plan: ChildPlan,
        *,
        thread_id: int,
        sender_id: str | None,
        root_budget: RunBudget | None,
        trace: RunTrace | None = None,
        kind: str = "foreground",
    ) -> ChildOutcome:
        """Run ``plan`` to its answer in process; raises what the loop raises (a provider
        failure, cancellation), after ending the child's run row.

        ``trace`` is the parent's: the child's start and end are recorded there, and the
        child's own events go into a trace of its own written with the parent's. The child
        is a ``talon.child`` span inside the parent's current one (the tool call that started it)."""
        attributes = {
            "talon.child.kind": kind,
            "talon.persona": plan.persona.name,
            "talon.thread_id": thread_id,
            "talon.depth": plan.lineage.depth,
            "talon.parent_run_id": plan.lineage.parent_run_id,
        }
        with otel.span("talon.child", attributes=attributes) as span:
            outcome = await self._run(
                plan,
                thread_id=thread_id,
                sender_id=sender_id,
                root_budget=root_budget,
                trace=trace,
                kind=kind,
            )
            otel.set_attributes(
                span,
                {
                    "talon.run_id": outcome.run_id,
                    "talon.outcome": "completed",
                    "talon.input_tokens": outcome.usage.input_tokens,
                    "talon.output_tokens": outcome.usage.output_tokens,
                    "talon.model_calls": outcome.model_calls,
                },
            )
            return outcome

    async def _run(
        self,
        plan: ChildPlan,
        *,
        thread_id: int,
        sender_id: str | None,
        root_budget: RunBudget | None,
        trace: RunTrace | None,
        kind: str,
    ) -> ChildOutcome:
        assert self.tools is not None, "attach() the host tools first"
        persona, lineage = plan.persona, plan.lineage
        # A child's model calls count for its root turn's sender, persona and channel: a spent
        # budget refuses the child as it refuses a turn.
        payer = await self.db.read(store.thread_payer, thread_id, sender_id)
        spent = await self.spending.check(payer.persona or persona.name, payer.channel or "", payer.senders)
        if spent is not None:
            raise RefusedError(spent.refusal(self.settings.currency))
        run_id = await self.db.run_transaction(self._start_run, persona, thread_id, lineage, kind)
        if plan.progress_events:
            self._progress[run_id] = []
            self._progress_threads[run_id] = thread_id
        parent_trace = trace or NULL_TRACE
        child_trace = parent_trace.child_trace(run_id, persona=persona.name, thread_id=thread_id)
        name = plan.id_prefix or persona.name
        parent_trace.child_started(run_id, name=name, mode=kind)
        started = time.monotonic()
        box = self.tools.toolbox(
            persona,
            thread_id,
            run_id,
            sender_id=sender_id,
            budget=root_budget,
            depth=lineage.depth,
            root_run_id=lineage.root_run_id,
            trace=child_trace,
        )
        system = system_prompt(
            persona,
            timezone=self.settings.timezone,
            channels=self._channels,
            current_channel="",
            tool_instructions=self.tools.instructions(persona),
        )
        findings = await findings_prompt(self.db, lineage.root_run_id)
        if findings:
            system = f"{system}\n\n{findings}"
        label = f"{plan.id_prefix}-{run_id}" if plan.id_prefix else str(run_id)
        log.info(
            "child %s (%s, depth %d) started by run %s", label, kind, lineage.depth, lineage.parent_run_id
        )
        try:
            result = await run_agent(
                self.providers[persona.provider],
                model=persona.model,
                system=system,
                messages=[ChatMessage("user", plan.prompt)],
                tools=box,
                max_turns=plan.max_turns,
                max_tokens=persona.max_tokens or self.settings.agent.max_tokens,
                call_timeout=self.settings.agent.turn_timeout,
                budget=child_budget(persona, plan.max_tool_rounds),
                trace=child_trace,
            )
        except BaseException as exc:
            status = "canceled" if isinstance(exc, asyncio.CancelledError) else "failed"
            parent_trace.child_ended(
                run_id,
                name=name,
                status=status,
                duration_ms=(time.monotonic() - started) * 1000,
                error_class=type(exc).__name__,
            )
            await self._end(run_id, status, str(exc) or type(exc).__name__)
            raise
        finally:
            self.tools.release(run_id)
            progress = self._progress.pop(run_id, [])
            self._progress_threads.pop(run_id, None)
        if root_budget is not None:
            root_budget.charge(result.usage)
        parent_trace.child_ended(
            run_id,
            name=name,
            status="completed",
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            duration_ms=(time.monotonic() - started) * 1000,
        )
        now = time.time()
        spend = run_spend(self.settings, result, persona, payer.channel or "", sender_id, now, payer=payer)
        await self.db.run_transaction(
            _complete, run_id, result.model or persona.model_ref, result.usage, result.model_calls, now, spend
        )
        return ChildOutcome(
            run_id, result.text, result.usage, result.model_calls, result.tool_calls, progress
        )

    @staticmethod
    def _start_run(
        conn: sqlite3.Connection, persona: Persona, thread_id: int, lineage: Lineage, kind: str
    ) -> int:
        run_id = start_run(conn, thread_id, persona.name, persona.model_ref, time.time())
        store.record_child_run(
            conn,
            run_id,
            parent_run_id=lineage.parent_run_id,
            root_run_id=lineage.root_run_id,
            depth=lineage.depth,
            kind=kind,
        )
        return run_id

    async def _end(self, run_id: int, status: str, error: str) -> None:
        try:
            await self.db.run_transaction(end_run, run_id, status, error[:2000], time.time())
        except Exception:
            log.exception("could not end child run %s", run_id)

    def is_foreground(self, run_id: int | None) -> bool:
        """Whether ``run_id`` is a running foreground child that asked for progress events."""
        return run_id is not None and run_id in self._progress

    def progress(self, run_id: int, event: dict[str, Any]) -> None:
        """A foreground child's progress event; its parent sees it in the child's result."""
        events = self._progress.setdefault(run_id, [])
        events.append(event)
        del events[:-PROGRESS_KEPT]
        thread_id = self._progress_threads.get(run_id)
        if self.bus is not None and thread_id is not None:  # the chat's live status (gateway/live_reply.py)
            self.bus.publish(thread_id, {"type": "child_progress", "message": event.get("message", "")})

    # ------------------------------------------------------------ background

    async def start_background(
        self,
        plan: ChildPlan,
        *,
        origin_thread_id: int,
        working_directory: str | None,
        sender_id: str | None = None,
    ) -> dict[str, Any]:
        """A background child as a delegation task; its ``child_jobs`` row is written with it,
        and whom its turns are charged to (the root turn's payer)."""
        persona, lineage = plan.persona, plan.lineage
        payer = await self.db.read(store.thread_payer, origin_thread_id, sender_id)
        spent = await self.spending.check(payer.persona or persona.name, payer.channel or "", payer.senders)
        if spent is not None:
            raise RefusedError(spent.refusal(self.settings.currency))

        def with_job(conn: sqlite3.Connection, task_id: str) -> None:
            job = store.ChildJob(
                id=task_id,
                parent_run_id=lineage.parent_run_id,
                root_run_id=lineage.root_run_id,
                depth=lineage.depth,
                labels=persona.capabilities,
                model=persona.model_ref,
                system_prompt=persona.system_prompt,
                max_tool_rounds=plan.max_tool_rounds,
                progress_events=plan.progress_events,
                id_prefix=plan.id_prefix,
            )
            store.insert_child_job(conn, job)
            store.set_job_payer(conn, task_id, payer)

        task = await self.delegation.spawn(
            persona=persona.name,
            origin_thread_id=origin_thread_id,
            prompt=plan.prompt,
            profile=persona.name,
            provider=persona.provider,
            working_directory=working_directory,
            timeout_minutes=None,
            providers=self.settings.providers,
            with_task=with_job,
        )
        return {"jobId": task["taskId"], "state": task["state"], "depth": lineage.depth}

    def lineage_of(self, thread_id: int) -> Lineage | None:
        """The lineage of the background child whose turn runs on ``thread_id``, if one does."""
        found = self._background.get(thread_id)
        return found[1] if found else None

    def job_of_thread(self, thread_id: int) -> str | None:
        found = self._background.get(thread_id)
        return found[0].id if found else None

    async def steering(self, thread_id: int, latest_text: str) -> list[str]:
        """At a background child's tool-call boundary: note its activity and take the
        steering messages waiting for it."""
        job_id = self.job_of_thread(thread_id)
        if job_id is None:
            return []

        def take(conn: sqlite3.Connection) -> list[str]:
            now = time.time()
            store.touch_job(conn, job_id, now, latest_text.strip() or None)
            return store.take_steering(conn, job_id, now)

        messages = await self.db.run_transaction(take)
        return [f"[message from the agent that started you]\n{m}" for m in messages]

    # ------------------------------------------------------------ turn hooks

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        """A background child's turn runs with its job's narrowed labels, prompt and model."""
        if thread.channel != BACKGROUND_CHANNEL:
            return persona, None

        def read(conn: sqlite3.Connection) -> store.ChildJob | None:
            task = background_task_of_thread(conn, thread.id)
            return None if task is None else store.child_job(conn, task.id)

        job = await self.db.read(read)
        if job is None:
            return persona, None
        provider, model = (job.model or persona.model_ref).split(":", 1)
        persona = replace(
            persona,
            capabilities=job.labels,
            system_prompt=job.system_prompt or persona.system_prompt,
            provider=provider,
            model=model,
            budgets=child_budget(persona, job.max_tool_rounds).limits,
        )
        self._background[thread.id] = (job, Lineage(job.depth, job.parent_run_id, job.root_run_id))
        return persona, None

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None:
        found = self._background.get(thread.id)
        if found is None:
            return
        _, lineage = found
        await self.db.run_transaction(
            store.record_child_run,
            run_id,
            parent_run_id=lineage.parent_run_id,
            root_run_id=lineage.root_run_id,
            depth=lineage.depth,
            kind="background",
        )

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        found = self._background.pop(thread.id, None)
        if found is not None:
            await self.db.run_transaction(store.touch_job, found[0].id, time.time(), (text or error or None))


def child_budget(persona: Persona, max_tool_rounds: int) -> RunBudget:
    """A child's own budget: the persona's, with ``max_tool_rounds`` (when set) as its round limit."""
    from gateway.budgets import RunBudget

    limits = persona.budgets
    if max_tool_rounds > 0:
        limits = replace(limits, max_tool_rounds=max_tool_rounds)
    return RunBudget(limits)


def _complete(
    conn: sqlite3.Connection,
    run_id: int,
    model: str,
    usage: Usage,
    model_calls: int,
    now: float,
    spend: RunSpend | None = None,
) -> None:
    complete_run(
        conn,
        run_id,
        model=model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        model_calls=model_calls,
        now=now,
        spend=spend,
    )
