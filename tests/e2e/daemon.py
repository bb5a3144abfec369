"""Run the real ``talon`` command in subprocesses, as a user would."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from gateway.control_client import ControlClient, DaemonNotRunningError

TALON = [sys.executable, "-m", "gateway.cli"]


def talon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TALON_"))}
    env.update(extra or {})
    return env


async def talon(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> tuple[int, str, str]:
    """Run one ``talon`` command to completion (in ``cwd``): (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *TALON,
        *args,
        cwd=cwd,
        env=env or talon_env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


class Daemon:
    """``talon run`` in the background; stopped (or killed) by the test."""

    def __init__(
        self, config: Path, env: dict[str, str] | None = None, log_file: Path | None = None, *args: str
    ):
        self.config = config
        self.args = args
        self.env = env or talon_env()
        self.log_file = log_file or config.parent / "daemon.log"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, data_dir: Path, *, ready_timeout: float = 20) -> None:
        log = self.log_file.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            *TALON,
            "run",
            "-c",
            str(self.config),
            *self.args,
            env=self.env,
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = asyncio.get_running_loop().time() + ready_timeout
        while asyncio.get_running_loop().time() < deadline:
            if self.proc.returncode is not None:
                raise RuntimeError(f"talon run exited {self.proc.returncode}:\n{self.log()}")
            try:
                async with ControlClient(data_dir) as client:
                    if (await client.call({"op": "ping"})).get("type") == "done":
                        return
            except (DaemonNotRunningError, ConnectionError, OSError):
                pass
            await asyncio.sleep(0.05)
        raise TimeoutError(f"talon run not ready in {ready_timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    async def stop(self, timeout: float = 20) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()

    async def __aenter__(self) -> Daemon:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
