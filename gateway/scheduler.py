"""The scheduler: due schedules become queue items, durably and exactly once.

Firing one occurrence is one transaction: a ``schedule_runs`` row (``UNIQUE(schedule_id,
due_at)``), a ``queue_items`` row of kind ``schedule`` in the schedule's thread, and the
schedule's next run. Two ticks racing on the same schedule enqueue it once: each re-reads
the schedule inside its transaction and only the first sees it still due.

Missed occurrences (the daemon was stopped) are handled by :mod:`gateway.scheduling.due`:
the latest one is fired if it is within the grace window, the rest are recorded as one
``skipped`` row. DST behaviour is described in :mod:`gateway.scheduling.cron`.

An agent schedule's queue item carries its retry policy (``max_attempts``, a delay doubling
from ``retry_delay_ms`` up to 5 minutes), which the queue applies to transient failures. A
shell schedule is not queued: the scheduler runs its command (through the wired
:class:`~gateway.scheduling.outcomes.ShellRunner`) right after the firing transaction, once;
a command a stop interrupted is recorded as failed at the next start, never run again. A
schedule past its ``expires_at`` is disabled before anything fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gateway.logs import log_retried
from gateway.scheduling.cron import ScheduleError, iso
from gateway.scheduling.cron import next_run as _next_run
from gateway.scheduling.due import DuePlan, plan_cron, plan_once
from gateway.scheduling.outcomes import ScheduleNotifier, ShellOutcome, ShellRunner, tail
from gateway.store import schedules
from gateway.store.db import Database
from gateway.store.queue import enqueue_task
from gateway.store.schedules import ScheduleRow

if TYPE_CHECKING:
    from gateway.personas import Persona

__all__ = ["Scheduler", "list_schedules", "record_result", "schedules_changed"]

log = logging.getLogger("talon.scheduler")

_RUNNING: weakref.WeakSet[Scheduler] = weakref.WeakSet()
_ERROR_BACKOFF = 1.0
_MIN_SLEEP = 0.01
RESULT_STATUSES = frozenset({"completed", "failed", "canceled", "retrying"})
RETRY_DELAY_CAP = 300.0


async def record_result(
    db: Database, schedule_id: str, due_at: float, *, status: str, run_id: int | None, error: str | None
) -> bool:
    """Record how a scheduled turn ended; the queue calls this when the turn is over.

    Updates the ``schedule_runs`` row of that occurrence and, unless a newer occurrence has
    already been recorded, the schedule's ``last_status``. Returns False when the
    occurrence is unknown (for example, the schedule was deleted meanwhile).

    ``retrying``: the attempt failed for a transient reason and the queue tries again.

    Raises:
        ValueError: ``status`` is not one of completed, failed, canceled, retrying.
    """
    if status not in RESULT_STATUSES:
        raise ValueError(f"status must be one of {', '.join(sorted(RESULT_STATUSES))}, not {status!r}")
    return await db.run_transaction(
        schedules.record_result,
        schedule_id,
        due_at,
        status=status,
        run_id=run_id,
        error=error,
        now=time.time(),
    )


async def list_schedules(db: Database) -> list[dict[str, Any]]:
    """Every schedule of every persona, for ``talon schedules``; times are ISO in their timezone."""
    return [
        {
            "id": row.id,
            "persona": row.persona,
            "thread_id": row.thread_id,
            "label": row.label,
            "cron_expr": row.cron_expr,
            "run_at": iso(row.run_at, row.timezone),
            "timezone": row.timezone,
            "prompt_file": row.prompt_file,
            "enabled": row.enabled,
            "next_run_at": iso(row.next_run_at, row.timezone),
            "last_run_at": iso(row.last_run_at, row.timezone),
            "last_status": row.last_status,
        }
        for row in await db.read(schedules.all_schedules)
    ]


def schedules_changed(db: Database) -> bool:
    """Tell every scheduler serving ``db`` that schedules changed, so it recomputes its sleep.
    Returns whether a running scheduler was told."""
    told = False
    for scheduler in list(_RUNNING):
        if scheduler.db is db and scheduler.running:
            scheduler.wake()
            told = True
    return told


class Scheduler:
    """Fires due cron and one-shot schedules into the durable queue.

    Args:
        db: the open Talon database.
        default_timezone: used for schedules whose timezone is missing.
        grace_seconds: how late an occurrence may still fire (after a restart, say).
        clock: epoch seconds now; tests pass a controllable one.
        on_enqueued: called with the thread id after each fired occurrence commits.
        personas: persona name -> :class:`~gateway.personas.Persona`, to read ``promptFile``
            aliases at fire time. Without it, schedules using a prompt file fail their runs.
        max_sleep: the longest :meth:`run` sleeps before looking at the table again.
        shell: runs a shell schedule's command; without it such runs fail.
        notifier: posts a shell run's notification (agent runs: :class:`ScheduleHook`).
    """

    def __init__(
        self,
        db: Database,
        *,
        default_timezone: str,
        grace_seconds: float = 600,
        clock: Callable[[], float] = time.time,
        on_enqueued: Callable[[int], None] = lambda thread_id: None,
        personas: Mapping[str, Persona] | None = None,
        max_sleep: float = 30.0,
        shell: ShellRunner | None = None,
        notifier: ScheduleNotifier | None = None,
    ) -> None:
        self.db = db
        self.default_timezone = default_timezone
        self.grace_seconds = grace_seconds
        self.max_sleep = max_sleep
        self._clock = clock
        self._on_enqueued = on_enqueued
        self._personas = personas
        self._wake = asyncio.Event()
        self._shell = shell
        self._notifier = notifier
        self._shell_runs: set[asyncio.Task[None]] = set()
        self.running = False
        _RUNNING.add(self)

    @staticmethod
    def next_run(cron_expr: str, tz: str, after: float) -> float:
        """The first occurrence of a 5-field cron in ``tz`` strictly after ``after``; DST-correct.

        Raises:
            ScheduleError: the expression or timezone is not usable.
        """
        return _next_run(cron_expr, tz, after)

    def wake(self) -> None:
        """Schedules changed: make :meth:`run` look at the table again now."""
        self._wake.set()

    async def tick(self) -> int:
        """Fire everything due now. Returns how many occurrences were enqueued."""
        now = self._clock()
        for schedule_id in await self.db.run_transaction(schedules.expire_due, now):
            log.info("schedule %s expired and is disabled", schedule_id)
        await self._fill_missing_next_runs(now)
        due = await self.db.read(schedules.due_schedules, now)
        fired = 0
        for schedule_id, due_at in due:
            try:
                thread_id = await self._fire(schedule_id, due_at, now)
            except Exception as exc:  # one broken schedule must not hold up the others
                log_retried(log, exc, "schedule %s: could not fire; retrying on the next tick", schedule_id)
                continue
            if thread_id is not None:
                fired += 1
                try:
                    self._on_enqueued(thread_id)
                except Exception:  # a listener's bug must not stop other schedules
                    log.exception("on_enqueued failed for thread %s", thread_id)
        return fired

    async def run(self, stop: asyncio.Event) -> None:
        """Tick, then sleep until the next due time (at most ``max_sleep``), until ``stop`` is set.
        Shell commands still running then are stopped (and recorded as failed)."""
        interrupted = await self.db.run_transaction(schedules.interrupt_shell_runs, self._clock())
        if interrupted:
            log.warning("%d shell schedule run(s) were cut short by a stop; recorded as failed", interrupted)
        self.running = True
        try:
            while not stop.is_set():
                self._wake.clear()
                delay = _MIN_SLEEP
                try:
                    await self.tick()
                    delay = await self._seconds_until_due()
                except Exception as exc:  # the loop must outlive a bad row or a locked database
                    log_retried(log, exc, "scheduler tick failed")
                    delay = _ERROR_BACKOFF
                await _wait_any(stop, self._wake, timeout=delay)
        finally:
            self.running = False
            for task in list(self._shell_runs):
                task.cancel()
            await asyncio.gather(*self._shell_runs, return_exceptions=True)

    async def _seconds_until_due(self) -> float:
        due_at = await self.db.read(schedules.next_due_at)
        if due_at is None:
            return self.max_sleep
        return min(self.max_sleep, max(_MIN_SLEEP, due_at - self._clock()))

    async def _fill_missing_next_runs(self, now: float) -> None:
        """Give enabled schedules without a next run one (rows written by other means)."""
        for row in await self.db.read(schedules.without_next_run):
            error = None
            next_at: float | None = None
            if row.run_at is not None:  # with both, the cron is only a stored placeholder
                next_at = row.run_at
            elif row.cron_expr:
                try:
                    next_at = _next_run(row.cron_expr, row.timezone or self.default_timezone, now)
                except ScheduleError as exc:
                    error = str(exc)
            else:
                error = "schedule has neither cronExpr nor runAt"
            if next_at is not None:
                await self.db.run_transaction(schedules.set_next_run, row.id, next_at, now)
            else:
                log.warning("schedule %s disabled: %s", row.id, error)
                await self.db.run_transaction(schedules.disable_failed, row.id, now)

    async def _fire(self, schedule_id: str, due_at: float, now: float) -> int | None:
        """Handle one due schedule; returns its thread id when an occurrence was enqueued."""
        row = await self.db.read(schedules.get_schedule, schedule_id)
        if row is None or not row.enabled or row.next_run_at != due_at:
            return None
        tz = row.timezone or self.default_timezone
        broken: str | None = None
        try:
            if row.cron_expr and row.run_at is None:
                plan = plan_cron(row.cron_expr, tz, due_at, now, self.grace_seconds)
                if plan.next_at is not None and row.expires_at is not None and plan.next_at >= row.expires_at:
                    plan = DuePlan(
                        plan.fire_at, plan.skipped, plan.skipped_is_lower_bound, plan.last_skipped_at, None
                    )
            else:
                plan = plan_once(due_at, now, self.grace_seconds)
        except ScheduleError as exc:
            broken = str(exc)
            plan = DuePlan(None, 0, False, None, None)
        prompt, prompt_error = await self._prompt_text(row) if plan.fire_at is not None else (None, None)

        def fire(conn: sqlite3.Connection) -> bool | None:
            current = schedules.get_schedule(conn, schedule_id)
            # Another tick fired it, or it was edited since we read it: leave it to the next tick.
            if (
                current is None
                or not current.enabled
                or current.next_run_at != due_at
                or current.updated_at != row.updated_at
            ):
                return None
            if broken is not None:
                schedules.insert_run(conn, schedule_id, due_at, "failed", broken, now)
                schedules.disable_failed(conn, schedule_id, now)
                return False
            return _record(conn, row, plan, prompt, prompt_error, now)

        enqueued = await self.db.run_transaction(fire)
        if enqueued is None:
            return None
        if broken is not None:
            log.warning("schedule %s disabled: %s", schedule_id, broken)
            return None
        if plan.skipped:
            log.info("schedule %s: %s", schedule_id, plan.skip_note())
        if enqueued and row.executor == "shell" and plan.fire_at is not None:
            task = asyncio.create_task(self._run_shell(row, plan.fire_at), name=f"schedule-{schedule_id}")
            self._shell_runs.add(task)
            task.add_done_callback(self._shell_runs.discard)
            return None
        return row.thread_id if enqueued else None

    async def _run_shell(self, row: ScheduleRow, due_at: float) -> None:
        """Run a shell schedule's command once and record how it ended."""
        try:
            if self._shell is None:
                outcome = ShellOutcome(None, 0, "", "shell schedules are not available in this process")
            else:
                outcome = await self._shell(row)
        except asyncio.CancelledError:
            outcome = ShellOutcome(None, 0, "", "stopped: the daemon shut down while the command ran")
            await self._shell_result(row, due_at, outcome)
            raise
        except Exception as exc:  # a runner bug must still end the run's record
            log.exception("schedule %s: the shell run failed", row.id)
            outcome = ShellOutcome(None, 0, "", f"internal error: {type(exc).__name__}")
        await self._shell_result(row, due_at, outcome)

    async def _shell_result(self, row: ScheduleRow, due_at: float, outcome: ShellOutcome) -> None:
        error = outcome.error
        if error is None and outcome.exit_code != 0:
            error = f"exit code {outcome.exit_code}"
        await self.db.run_transaction(
            schedules.record_result,
            row.id,
            due_at,
            status="completed" if outcome.ok else "failed",
            run_id=None,
            error=error,
            now=self._clock(),
            exit_code=outcome.exit_code,
            duration_ms=outcome.duration_ms,
            output_tail=tail(outcome.output) or "",
        )
        if self._notifier is not None:
            summary = f"ran: exit code {outcome.exit_code} in {outcome.duration_ms} ms"
            if error is not None and outcome.exit_code is None:
                summary = f"failed: {error}"
            await self._notifier.after_run(row, ok=outcome.ok, summary=summary, output=outcome.output)

    async def _prompt_text(self, row: ScheduleRow) -> tuple[str | None, str | None]:
        """(prompt text, None) or (None, why it cannot be read); prompt files are read now."""
        alias = row.prompt_file
        if not alias:
            return row.prompt or "", None
        persona = (self._personas or {}).get(row.persona)
        path = persona.prompt_alias(alias) if persona is not None else None
        if path is None:
            return None, f"prompt file {alias!r} of persona {row.persona!r} not found"
        try:
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"prompt file {alias!r} could not be read: {exc}"
        if not text.strip():
            return None, f"prompt file {alias!r} is empty"
        return text, None


def _record(
    conn: sqlite3.Connection,
    row: ScheduleRow,
    plan: DuePlan,
    prompt: str | None,
    prompt_error: str | None,
    now: float,
) -> bool:
    """Write the plan inside the firing transaction; True when a queue item was added."""
    schedule_id = row.id
    if plan.last_skipped_at is not None:
        schedules.insert_run(conn, schedule_id, plan.last_skipped_at, "skipped", plan.skip_note(), now)
    status, enqueued = ("skipped" if plan.fire_at is None else row.last_status), False
    if plan.fire_at is not None and prompt_error is not None:
        schedules.insert_run(conn, schedule_id, plan.fire_at, "failed", prompt_error, now)
        status = "failed"
    elif plan.fire_at is not None and row.executor == "shell":
        if schedules.insert_run(conn, schedule_id, plan.fire_at, "running", None, now, started_at=now):
            status, enqueued = "running", True
    elif plan.fire_at is not None and schedules.insert_run(
        conn, schedule_id, plan.fire_at, "queued", None, now
    ):
        payload = {
            "schedule_id": schedule_id,
            "persona": row.persona,
            "prompt": prompt,
            "label": row.label,
            "due_at": plan.fire_at,
            # The queue retries transient failures of this turn by the schedule's own policy.
            "retry": {
                "max_attempts": row.max_attempts,
                "delay": row.retry_delay_ms / 1000,
                "max_delay": RETRY_DELAY_CAP,
            },
        }
        enqueue_task(conn, row.thread_id, "schedule", payload, now=now)
        status, enqueued = "queued", True
    last_run_at = plan.fire_at if plan.fire_at is not None else row.last_run_at
    schedules.advance(
        conn, schedule_id, next_run_at=plan.next_at, last_run_at=last_run_at, last_status=status, now=now
    )
    return enqueued


async def _wait_any(*events: asyncio.Event, timeout: float) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for waiter in waiters:
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
