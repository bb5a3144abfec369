"""ffmpeg and ffprobe as bounded child processes: a time limit, a cap on what they print, and an
environment holding only ``PATH`` (no secret of Talon's reaches them).

They read a file Talon names (or bytes on stdin) and write to stdout; nothing is written to disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from pathlib import Path

from gateway.errors import RefusedError

__all__ = ["AudioToolError", "duration_of", "ffmpeg_missing", "run_tool", "to_ogg_opus"]

TIMEOUT = 30.0
MAX_OUTPUT = 32 * 1024 * 1024
_MAX_STDERR = 4096
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


class AudioToolError(RefusedError):
    """The audio could not be handled: ffmpeg or ffprobe is missing, failed on it, ran too long or
    printed too much; the text says which."""


def ffmpeg_missing() -> str | None:
    """Why voice conversion cannot run here (the install command), or None when it can."""
    missing = [name for name in ("ffmpeg", "ffprobe") if shutil.which(name, path=_ENV["PATH"]) is None]
    if not missing:
        return None
    return f"{' and '.join(missing)} not found on PATH; install it (Debian: apt-get install ffmpeg)"


async def run_tool(
    tool: str,
    args: list[str],
    *,
    data: bytes | None = None,
    timeout: float = TIMEOUT,
    limit: int = MAX_OUTPUT,
) -> bytes:
    """``tool args`` (ffmpeg or ffprobe); returns its stdout, at most ``limit`` bytes.

    Raises:
        AudioToolError: Not installed, non-zero exit, over ``timeout`` or over ``limit``.
    """
    binary = shutil.which(tool, path=_ENV["PATH"])
    if binary is None:
        raise AudioToolError(ffmpeg_missing() or f"{tool} not found")
    proc = await asyncio.create_subprocess_exec(
        binary,
        *args,
        stdin=asyncio.subprocess.PIPE if data is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_ENV,
        start_new_session=True,  # its whole group is killed on timeout
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await asyncio.gather(_feed_and_read(proc, data, limit), _read_err(proc))
            code = await proc.wait()
    except TimeoutError:
        raise AudioToolError(f"{tool} took longer than {timeout:g} s") from None
    finally:
        if proc.returncode is None:
            _kill(proc)
            await proc.wait()
    if code != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise AudioToolError(f"{tool} failed ({last[0][:300]})")
    return out


async def _feed_and_read(proc: asyncio.subprocess.Process, data: bytes | None, limit: int) -> bytes:
    assert proc.stdout is not None
    feeder = asyncio.create_task(_feed(proc, data)) if data is not None else None
    chunks: list[bytes] = []
    size = 0
    try:
        while block := await proc.stdout.read(64 * 1024):
            size += len(block)
            if size > limit:
                _kill(proc)
                raise AudioToolError(f"the converted audio is over {limit:,} bytes")
            chunks.append(block)
    finally:
        if feeder is not None:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await feeder
    return b"".join(chunks)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        with contextlib.suppress(ConnectionError):
            proc.stdin.write(data)
            await proc.stdin.drain()
    finally:
        # Also when the tool stopped reading early: an open stdin keeps the process's
        # transport open past its exit, for the garbage collector to close.
        proc.stdin.close()


async def _read_err(proc: asyncio.subprocess.Process) -> bytes:
    assert proc.stderr is not None
    kept = b""
    while block := await proc.stderr.read(4096):
        kept = (kept + block)[-_MAX_STDERR:]
    return kept


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def duration_of(path: Path, *, timeout: float = TIMEOUT) -> float:
    """Seconds of audio in ``path``, by ffprobe.

    Raises:
        AudioToolError: ffprobe cannot read it as audio.
    """
    out = await run_tool(
        "ffprobe",
        ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", "--", str(path)],
        timeout=timeout,
        limit=4096,
    )
    try:
        return float(out.decode("ascii", "replace").strip().splitlines()[0])
    except (ValueError, IndexError):
        raise AudioToolError("ffprobe found no audio duration in it") from None


async def to_ogg_opus(
    source: Path | bytes, *, max_seconds: float | None = None, bitrate: str = "32k", limit: int = MAX_OUTPUT
) -> bytes:
    """``source`` (a file, or bytes of any format ffmpeg reads) as mono OGG/Opus, cut to
    ``max_seconds``: what Telegram plays as a voice message and transcription endpoints take."""
    data = source if isinstance(source, bytes) else None
    args = (
        ["-hide_banner", "-nostdin", "-loglevel", "error"]
        if data is None
        else ["-hide_banner", "-loglevel", "error"]
    )
    args += ["-i", "pipe:0" if data is not None else f"file:{source}"]
    if max_seconds is not None:
        args += ["-t", f"{max_seconds:g}"]
    args += ["-vn", "-ac", "1", "-ar", "48000", "-c:a", "libopus", "-b:a", bitrate]
    args += ["-application", "voip", "-f", "ogg", "pipe:1"]
    return await run_tool("ffmpeg", args, data=data, limit=limit)
