"""Resource limits of a sandboxed program: rlimits through ``prlimit``, a cgroup where one is writable.

Per-process limits (CPU seconds, address space, open files, file size and, for a daemon not
running as root, processes) are set by running the sandbox under util-linux ``prlimit``, so
they hold from the first instruction and are inherited by every child.

``RLIMIT_NPROC`` is not enforced for root, and counts every process of the user, so a fork
bomb is also bounded by a cgroup of its own when the daemon may create one: a ``pids``
cgroup (``pids.max``) and a ``memory`` cgroup (``memory.limit_in_bytes`` / ``memory.max``)
under the daemon's own, in cgroup v1 or v2. The program joins them before it executes
anything (a tiny ``/bin/sh`` prologue writes its pid into ``cgroup.procs`` and then
``exec``s the sandbox), and :meth:`CallCgroups.kill` can end every process in them at once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CallCgroups", "Limits", "limited_command"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Runs first: join each cgroup named in the arguments, then become the sandbox.
_JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


@dataclass(frozen=True, slots=True)
class Limits:
    """What one sandboxed call may use.

    Attributes:
        cpu_seconds (:obj:`int`): CPU time per process (SIGXCPU, then SIGKILL).
        memory_bytes (:obj:`int`): Address space per process, and the whole call's memory
            where a memory cgroup is available.
        processes (:obj:`int`): Processes and threads of the call (cgroup ``pids.max``; also
            ``RLIMIT_NPROC`` when the daemon is not root).
        open_files (:obj:`int`): Open descriptors per process.
        file_bytes (:obj:`int`): The largest file a process may write.
    """

    cpu_seconds: int = 600
    memory_bytes: int = 2 * 1024**3
    processes: int = 256
    open_files: int = 1024
    file_bytes: int = 1024**3


def limited_command(limits: Limits, argv: list[str], cgroups: CallCgroups | None = None) -> list[str]:
    """``argv`` run under ``prlimit`` (and inside ``cgroups`` when given)."""
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if prlimit is None:
        raise FileNotFoundError("prlimit (util-linux) is not installed")
    options = [
        f"--cpu={limits.cpu_seconds}",
        f"--as={limits.memory_bytes}",
        f"--nofile={limits.open_files}",
        f"--fsize={limits.file_bytes}",
        "--core=0",
    ]
    if os.geteuid() != 0:
        # The count is per user, daemon included; root is not held to it at all.
        options.append(f"--nproc={limits.processes + _own_tasks()}")
    command = [prlimit, *options, "--", *argv]
    if cgroups is None or not cgroups.procs_files:
        return command
    return ["/bin/sh", "-c", _JOIN, "sh", str(len(cgroups.procs_files)), *cgroups.procs_files, *command]


def _own_tasks() -> int:
    try:
        return len(os.listdir("/proc/self/task")) + 64
    except OSError:
        return 64


class CallCgroups:
    """The cgroups of one call (possibly none): created by :meth:`create`, removed by :meth:`remove`."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders

    @property
    def procs_files(self) -> list[str]:
        return [str(f / "cgroup.procs") for f in self.folders]

    @classmethod
    def create(cls, limits: Limits) -> CallCgroups:
        """Cgroups bounding processes and memory, where the daemon may make them; empty otherwise."""
        name = f"talon-sandbox-{uuid.uuid4().hex[:12]}"
        folders: list[Path] = []
        for parent, settings in _parents(limits):
            folder = parent / name
            try:
                folder.mkdir()
                for file, value in settings.items():
                    (folder / file).write_text(value, encoding="ascii")
            except OSError:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            folders.append(folder)
        return cls(folders)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for file in self.procs_files:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in Path(file).read_text(encoding="ascii").split())
        return found

    def kill(self) -> None:
        """SIGKILL every process still in the call's cgroups."""
        for folder in self.folders:
            kill_file = folder / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1", encoding="ascii")
        for _ in range(3):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.folders = []


def _parents(limits: Limits) -> list[tuple[Path, dict[str, str]]]:
    """Where this process may make child cgroups, with the files that set the limits."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return []
    v1 = {
        "pids": {"pids.max": str(limits.processes)},
        "memory": {"memory.limit_in_bytes": str(limits.memory_bytes)},
    }
    found: list[tuple[Path, dict[str, str]]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":
            found += _v2_parent(_CGROUP_ROOT / relative, limits)
            continue
        for controller in controllers.split(","):
            if controller in v1:
                parent = _CGROUP_ROOT / controller / relative
                if os.access(parent, os.W_OK):
                    found.append((parent, v1[controller]))
    return found


def _v2_parent(parent: Path, limits: Limits) -> list[tuple[Path, dict[str, str]]]:
    try:
        enabled = (parent / "cgroup.subtree_control").read_text(encoding="ascii").split()
    except OSError:
        return []
    settings = {}
    if "pids" in enabled:
        settings["pids.max"] = str(limits.processes)
    if "memory" in enabled:
        settings["memory.max"] = str(limits.memory_bytes)
    return [(parent, settings)] if settings and os.access(parent, os.W_OK) else []
