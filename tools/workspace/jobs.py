"""Background shell jobs: started by ``bash`` with ``run_in_background``, owned by their thread.

A job's output goes to ``/workspace/.jobs/<job_id>.log`` (written by the daemon, at most the
extreme-output limit; past it the job is killed), it runs at most its ``timeout_ms``, and it
ends with the daemon (bubblewrap dies with its parent). Only the thread that started a job
can see it: ``wait_for`` accepts the pid of a job of its own thread and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.workspace import process
from tools.workspace.sandbox import SandboxedCommand

__all__ = ["MAX_JOBS_PER_THREAD", "Job", "JobOwner", "find_job", "start_job"]

MAX_JOBS_PER_THREAD = 8
LOG_FOLDER = ".jobs"

JobOwner = tuple[str, int]  # (persona, thread_id)


@dataclass(slots=True)
class Job:
    """One background job.

    Attributes:
        job_id (:obj:`str`): ``job_<hex>``.
        pid (:obj:`int`): The host pid of its sandbox (what ``wait_for`` takes).
        log_path (:obj:`str`): The log as the model sees it (``/workspace/.jobs/<id>.log``).
        exit_code (:obj:`int` | :obj:`None`): Set when it has ended on its own.
        ended (:class:`asyncio.Event`): Set when it has ended, however.
    """

    job_id: str
    pid: int
    log_path: str
    started_at: float
    exit_code: int | None = None
    end_reason: str | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def status(self) -> dict[str, object]:
        state = "running" if not self.ended.is_set() else (self.end_reason or "exited")
        return {"job_id": self.job_id, "pid": self.pid, "log_path": self.log_path, "status": state,
                "exit_code": self.exit_code}  # fmt: skip


_JOBS: dict[JobOwner, dict[str, Job]] = {}


def find_job(owner: JobOwner, pid: int) -> Job | None:
    """The job of ``owner`` whose pid is ``pid``; another thread's job is not found."""
    return next((j for j in _JOBS.get(owner, {}).values() if j.pid == pid), None)


def running_count(owner: JobOwner) -> int:
    return sum(1 for j in _JOBS.get(owner, {}).values() if not j.ended.is_set())


async def start_job(owner: JobOwner, command: SandboxedCommand, workspace: Path, max_runtime: float) -> Job:
    """Start ``command`` in the background, its output appended to a log in ``workspace``."""
    job_id = f"job_{secrets.token_hex(6)}"
    try:
        fd = await asyncio.to_thread(_open_log, workspace, f"{job_id}.log")
    except BaseException:
        command.discard()  # never started: its cgroups and namespace pipe go back
        raise
    try:
        proc = await process.start(command)
    except BaseException:
        os.close(fd)
        raise
    job = Job(job_id, proc.pid, f"/workspace/{LOG_FOLDER}/{job_id}.log", time.time())
    job.task = asyncio.create_task(_supervise(job, proc, command, fd, max_runtime))
    _JOBS.setdefault(owner, {})[job_id] = job
    return job


def _open_log(workspace: Path, name: str) -> int:
    """Create the log without following a link the shell may have put in its way."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    top = os.open(workspace, flags)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(LOG_FOLDER, 0o755, dir_fd=top)
        folder = os.open(LOG_FOLDER, flags, dir_fd=top)
    finally:
        os.close(top)
    try:
        mode = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, mode, 0o644, dir_fd=folder)
    finally:
        os.close(folder)


async def _supervise(
    job: Job, proc: asyncio.subprocess.Process, command: SandboxedCommand, fd: int, max_runtime: float
) -> None:
    written = 0

    async def pump(stream: asyncio.StreamReader | None) -> None:
        nonlocal written
        if stream is None:
            return
        while chunk := await stream.read(64 * 1024):
            room = process.MAX_OUTPUT_BYTES - written
            await asyncio.to_thread(os.write, fd, chunk[: max(room, 0)])
            written += len(chunk)
            if written > process.MAX_OUTPUT_BYTES:
                job.end_reason = "output_limit"
                return

    try:
        pumps = asyncio.gather(pump(proc.stdout), pump(proc.stderr))
        try:
            async with asyncio.timeout(max_runtime):
                await pumps
                if job.end_reason is None:
                    await proc.wait()
        except TimeoutError:
            job.end_reason = "timed_out"
        if job.end_reason is None:
            job.exit_code = process.exit_code(proc.returncode)
    finally:
        await process.stop(proc, command)
        note = f"\n[talon: job ended: {job.end_reason or f'exit code {job.exit_code}'}]\n".encode()
        with contextlib.suppress(OSError):
            os.write(fd, note)
        os.close(fd)
        job.ended.set()
