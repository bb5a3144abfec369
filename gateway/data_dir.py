"""The data dir: created owner-only, and held by one daemon at a time.

The lock is an exclusive ``flock`` on ``<data_dir>/talon.lock``, which holds the owner's pid so
that a refused second daemon (or ``talon migrate``) can name it. The kernel releases it when
the process ends, however it ends.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from gateway.config import Settings
from gateway.errors import RefusedError

__all__ = ["LOCK_FILE", "AlreadyRunningError", "DataDirLock", "prepare_data_dir"]

LOCK_FILE = "talon.lock"


class AlreadyRunningError(RefusedError):
    """Another daemon holds the data dir; the message names it."""


class DataDirLock:
    """An exclusive lock on the data dir: a second daemon on it is refused."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock and write this process's pid into the lock file.

        Raises:
            AlreadyRunningError: Another process holds it.
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise AlreadyRunningError(
                f"another Talon daemon (pid {holder}) is using {self.path.parent}; stop it first "
                "or give this one its own data_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock; nothing happens when it is not held."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def prepare_data_dir(settings: Settings) -> Path:
    """Create the data dir when missing and make it owner-only; returns its path."""
    data = settings.data_path
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o700)  # the control and bridge sockets inside rely on this
    return data
