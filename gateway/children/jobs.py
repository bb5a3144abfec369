"""Background children seen from their parent: cancel, health, steering; and their progress.

A job is a background task with a ``child_jobs`` row; only the thread and persona that
started it may reach it (:func:`owned_job`). Everything here reads or writes the store, so
it works the same after a restart.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from gateway.delegation import Delegation, DelegationError
from gateway.store import children as store
from gateway.store.delegation import TERMINAL, BackgroundTask, background_task, background_task_of_thread

__all__ = [
    "MAX_STEERING_BYTES",
    "add_progress",
    "cancel_job",
    "job_health",
    "job_of_thread",
    "owned_job",
    "steer_job",
]

MAX_STEERING_BYTES = 16 * 1024
OUTPUT_LINES = 20


def owned_job(
    conn: sqlite3.Connection, job_id: str, origin_thread_id: int, persona: str
) -> tuple[BackgroundTask, store.ChildJob]:
    """The job ``job_id`` if this thread's persona started it.

    Raises:
        :class:`gateway.delegation.DelegationError`: No such job was started here.
    """
    task = background_task(conn, job_id, origin_thread_id)
    job = store.child_job(conn, job_id) if task is not None else None
    if task is None or job is None or task.persona != persona:
        raise DelegationError(
            f"no background job {job_id!r} was started by the agent tool in this conversation; "
            "use the jobId that agent returned with mode 'background'"
        )
    return task, job


def job_of_thread(conn: sqlite3.Connection, thread_id: int) -> str | None:
    """The job whose turns run on ``thread_id`` (a background child's own thread), if any."""
    task = background_task_of_thread(conn, thread_id)
    if task is None or store.child_job(conn, task.id) is None:
        return None
    return task.id


async def cancel_job(
    delegation: Delegation, *, job_id: str, reason: str, origin_thread_id: int, persona: str
) -> dict[str, Any]:
    """Cancel a running job, recording why; a finished job is reported, not an error."""

    def check(conn: sqlite3.Connection) -> BackgroundTask:
        task, _ = owned_job(conn, job_id, origin_thread_id, persona)
        if task.state not in TERMINAL:
            store.set_cancel_reason(conn, job_id, reason)
        return task

    task = await delegation.db.run_transaction(check)
    if task.state in TERMINAL:
        return {
            "jobId": job_id,
            "state": task.state,
            "note": f"the job had already {task.state}; nothing to cancel",
        }
    outcome = await delegation.cancel_background(job_id, origin_thread_id)
    return {"jobId": job_id, "state": outcome["state"], "reason": reason}


async def job_health(
    delegation: Delegation, *, job_id: str, origin_thread_id: int, persona: str
) -> dict[str, Any]:
    """A snapshot of a job: state, times, pending steering, progress and its last output lines."""

    def read(conn: sqlite3.Connection) -> dict[str, Any]:
        task, job = owned_job(conn, job_id, origin_thread_id, persona)
        now = time.time()
        running = task.state not in TERMINAL
        end = now if running else task.updated_at
        last = job.last_activity_at or task.updated_at
        output = task.result if task.result is not None and not running else job.last_output
        out: dict[str, Any] = {
            "jobId": job_id,
            "state": task.state,
            "elapsedMs": round((end - task.created_at) * 1000),
            "lastActivityAt": last,
            "pendingSteering": store.pending_steering(conn, job_id),
            "progress": [
                {"message": e.message, "phase": e.phase, "metadata": e.metadata, "at": e.created_at}
                for e in store.recent_progress(conn, job_id)
            ],
            "lastOutputLines": (output or "").splitlines()[-OUTPUT_LINES:],
        }
        if running:
            out["idleSinceMs"] = round((now - last) * 1000)
        if task.error:
            out["error"] = task.error
        if job.cancel_reason:
            out["cancelReason"] = job.cancel_reason
        return out

    return await delegation.db.read(read)


async def steer_job(
    delegation: Delegation, *, job_id: str, message: str, origin_thread_id: int, persona: str
) -> dict[str, Any]:
    """Keep a steering message for the job's next tool-call boundary."""
    size = len(message.encode("utf-8", "surrogatepass"))
    if not message.strip():
        raise DelegationError("message is empty; say what the background agent should change")
    if size > MAX_STEERING_BYTES:
        raise DelegationError(
            f"message is {size} bytes; the limit is {MAX_STEERING_BYTES}: send a shorter one"
        )

    def add(conn: sqlite3.Connection) -> int:
        task, _ = owned_job(conn, job_id, origin_thread_id, persona)
        if task.state in TERMINAL:
            raise DelegationError(
                f"job {job_id} has already {task.state}; a finished job cannot be steered "
                "(its result was posted into this conversation)"
            )
        return store.add_steering(conn, job_id, message, time.time())

    pending = await delegation.db.run_transaction(add)
    return {
        "jobId": job_id,
        "delivered": "at the job's next tool-call boundary",
        "pendingSteering": pending,
    }


def add_progress(
    conn: sqlite3.Connection,
    thread_id: int,
    message: str,
    phase: str | None,
    metadata: dict[str, Any] | None,
) -> str | None:
    """Keep a background child's progress event; the job id, or None when ``thread_id`` is
    not a background child's thread."""
    job_id = job_of_thread(conn, thread_id)
    if job_id is not None:
        store.add_progress(conn, job_id, message, phase, metadata, time.time())
    return job_id
