"""A sandbox's PID namespace, ended from outside in one step.

Every process a sandboxed command starts lives in bubblewrap's PID namespace, whatever it did
with sessions and process groups (``--new-session`` puts the command in a session of its own,
out of reach of the group its starter kills). The kernel ends every process of a PID
namespace when the namespace's first process dies, so killing that one process ends them all.

``--die-with-parent`` already kills it when ``bwrap`` dies, but only through a parent-death
signal set up inside ``bwrap``; :class:`NamespaceInit` kills it directly. ``bwrap`` reports the
process on ``--info-fd`` (``child-pid`` and ``pid-namespace`` in a JSON object); it is signalled
through a pidfd, after checking that the pid is still in that namespace, so a pid reused by
another process is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal

__all__ = ["NamespaceInit"]

log = logging.getLogger(__name__)

_INFO_MAX = 64 * 1024


class NamespaceInit:
    """The first process of one sandbox's PID namespace, as ``bwrap --info-fd`` reports it.

    Lifecycle: :meth:`arguments` go on the ``bwrap`` command line, :attr:`child_fd` is passed to
    the child, :meth:`started` is called once it is spawned, :meth:`kill` ends the namespace,
    :meth:`close` gives the pipe back (``kill`` does too).
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._read, False)

    @property
    def child_fd(self) -> int:
        """The descriptor ``bwrap`` writes its information to (to pass to the child)."""
        return self._write

    def arguments(self) -> list[str]:
        """The ``bwrap`` options that make it report its namespace's first process."""
        return ["--info-fd", str(self._write)]

    def started(self) -> None:
        """The child has its copy of the write end; the parent's is closed, so a ``bwrap`` that
        failed before writing leaves an empty pipe rather than a read that waits."""
        self._close_write()

    def kill(self) -> None:
        """SIGKILL the namespace's first process, which ends every process of the namespace;
        nothing happens when ``bwrap`` never got as far as reporting it, or it is gone."""
        try:
            pid, namespace = self._reported()
            if pid is None:
                return
            with contextlib.suppress(ProcessLookupError, FileNotFoundError, PermissionError):
                pidfd = os.pidfd_open(pid)
                try:
                    if os.readlink(f"/proc/{pid}/ns/pid") == f"pid:[{namespace}]":
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                finally:
                    os.close(pidfd)
        except OSError as exc:  # /proc unreadable, pidfd unsupported: the other kills remain
            log.debug("could not end a sandbox's PID namespace directly: %s", exc)
        finally:
            self.close()

    def close(self) -> None:
        self._close_write()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _close_write(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1

    def _reported(self) -> tuple[int | None, int | None]:
        if self._read < 0:
            return None, None
        try:
            data = os.read(self._read, _INFO_MAX)
        except BlockingIOError:
            return None, None
        try:
            info = json.loads(data)
            return int(info["child-pid"]), int(info["pid-namespace"])
        except (ValueError, KeyError, TypeError):
            return None, None
