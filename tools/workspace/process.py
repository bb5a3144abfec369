"""Running a sandboxed command: its output bounded, its time bounded, all of it killed at the end.

The command starts in a process group of its own (behind its egress proxy, when it has one,
which closes with it); when it finishes, times out, floods its
output past the extreme limit or its call is cancelled, its PID namespace is ended
(:mod:`gateway.sandbox_namespace`: every process it started, whatever session or group it
moved to), and the whole group and everything in its cgroups is killed. Output is read as it comes and kept as head and tail (:class:`HeadTail`), so the
daemon's memory does not grow with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass

from tools.workspace.output_cap import HeadTail
from tools.workspace.sandbox import SandboxedCommand

__all__ = ["HEAD_BYTES", "MAX_OUTPUT_BYTES", "TAIL_BYTES", "Finished", "run_captured", "start", "stop"]

HEAD_BYTES = 50 * 1024
TAIL_BYTES = 50 * 1024
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
_CHUNK = 64 * 1024
REAP_TIMEOUT = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Finished:
    """How a foreground command ended.

    Attributes:
        exit_code (:obj:`int` | :obj:`None`): Its exit status; a signal ``N`` is ``128 + N``;
            ``None`` when it was killed for time or output.
        stdout (:obj:`str`): Head and tail of standard output.
        stderr (:obj:`str`): Head and tail of standard error.
        timed_out (:obj:`bool`): Killed at the time limit.
        output_limit (:obj:`bool`): Killed at the extreme-output limit.
        truncated (:obj:`bool`): Some output was left out.
        duration_ms (:obj:`int`): Wall time.
        output_bytes (:obj:`int`): Everything it wrote, both streams.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    output_limit: bool
    truncated: bool
    duration_ms: int
    output_bytes: int


async def start(
    command: SandboxedCommand, *, stdout: int = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """Start ``command`` in its own process group, stdin closed (its egress proxy first)."""
    try:
        if command.egress is not None:
            await command.egress.start()
        return await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=stdout,
            stderr=asyncio.subprocess.PIPE
            if stdout == asyncio.subprocess.PIPE
            else asyncio.subprocess.STDOUT,
            env=command.env,
            cwd="/",
            start_new_session=True,
            pass_fds=(command.init.child_fd,),
        )
    except BaseException:
        command.cgroups.remove()
        command.init.close()
        if command.egress is not None:
            await command.egress.close()
        raise
    finally:
        command.init.started()


async def stop(proc: asyncio.subprocess.Process, command: SandboxedCommand) -> None:
    """Kill the command's PID namespace, process group and cgroups, reap it and remove the
    cgroups."""
    command.init.kill()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    command.cgroups.kill()
    try:
        async with asyncio.timeout(REAP_TIMEOUT):
            await proc.wait()
    except ProcessLookupError:
        pass
    except TimeoutError:  # the call must not hang on a sandbox that is slow to go
        log.warning("a killed sandbox (pid %s) was not reaped within %g s", proc.pid, REAP_TIMEOUT)
    for _ in range(50):
        if not command.cgroups.pids():
            break
        command.cgroups.kill()
        await asyncio.sleep(0.01)
    command.cgroups.remove()
    if command.egress is not None:
        await command.egress.close()


def exit_code(returncode: int | None) -> int | None:
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


async def run_captured(command: SandboxedCommand, timeout: float) -> Finished:
    """Run ``command`` to its end, at most ``timeout`` seconds, its output bounded."""
    started = time.monotonic()
    proc = await start(command)
    out, err = HeadTail(HEAD_BYTES, TAIL_BYTES), HeadTail(HEAD_BYTES // 2, TAIL_BYTES // 2)
    flooded = asyncio.Event()

    async def pump(stream: asyncio.StreamReader | None, into: HeadTail) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_CHUNK):
            into.feed(chunk)
            if out.total + err.total > MAX_OUTPUT_BYTES:
                flooded.set()
                return

    pumps = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
    waiter = asyncio.ensure_future(flooded.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait({pumps, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        timed_out = not done
        if pumps in done:
            async with asyncio.timeout(max(0.1, timeout - (time.monotonic() - started))):
                await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        finished_by_itself = proc.returncode is not None
        await stop(proc, command)
        waiter.cancel()
        pumps.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pumps
    killed = timed_out or flooded.is_set()
    return Finished(
        exit_code=exit_code(proc.returncode) if finished_by_itself and not killed else None,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out and not flooded.is_set(),
        output_limit=flooded.is_set(),
        truncated=out.truncated or err.truncated,
        duration_ms=int((time.monotonic() - started) * 1000),
        output_bytes=out.total + err.total,
    )
