"""The one bubblewrap sandbox: the command line every confined program runs under.

Persona MCP servers (:mod:`gateway.persona_mcp.sandbox`) and the workspace shell
(:mod:`tools.workspace.shell`) both build their ``bwrap`` arguments here, so they see the
same confinement: the system directories read-only, the workspaces they are given bound
read-write or read-only, a fresh ``/tmp``, ``/proc`` and ``/dev``, new user, PID, IPC, UTS
and cgroup namespaces, no capabilities, no network unless allowed, and death with the
process that started them. Nothing else of the host is visible: no home directory, no
data dir, no daemon socket.

The sandboxed program's environment is the environment ``bwrap`` is started with; values
never travel on the command line, which any local user can read.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gateway.errors import ConfigError

__all__ = [
    "DEFAULT_BWRAP",
    "SYSTEM_PATH",
    "Mount",
    "SandboxError",
    "SandboxSpec",
    "bwrap_arguments",
    "find_bwrap",
    "missing_message",
    "sandbox_problem",
    "unset_names",
]

DEFAULT_BWRAP = "bwrap"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What ordinary programs need from /etc: the loader cache, certificates, users, time zone.
_ETC_ALWAYS = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
)
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf")


class SandboxError(ConfigError):
    """A program cannot be launched in the sandbox as configured; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Mount:
    """A host directory made visible inside the sandbox.

    Attributes:
        source (:obj:`str`): The host path (resolved, existing).
        target (:obj:`str`): Where the sandbox sees it.
        writable (:obj:`bool`): Bound read-write; read-only otherwise.
    """

    source: str
    target: str
    writable: bool = True


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What one sandboxed program sees.

    Attributes:
        mounts (tuple[:class:`Mount`, ...]): Workspaces, bound after the system directories.
        cwd (:obj:`str`): The working directory inside the sandbox.
        network (:obj:`bool`): Share the host's network (and its resolver files).
        read_only_paths (tuple[:obj:`str`, ...]): Host paths visible read-only at the same
            path (a runtime outside the system directories); missing ones are skipped.
        unset (tuple[:obj:`str`, ...]): Variables to remove from the inherited environment.
    """

    mounts: tuple[Mount, ...]
    cwd: str
    network: bool = False
    read_only_paths: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()


def bwrap_arguments(spec: SandboxSpec) -> list[str]:
    """The ``bwrap`` options for ``spec`` (everything before ``--``)."""
    args = ["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if spec.network:
        args.append("--share-net")
    args += ["--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in _ETC_ALWAYS + (_ETC_NETWORK if spec.network else ()):
        args += ["--ro-bind-try", path, path]
    for path in spec.read_only_paths:
        args += ["--ro-bind-try", path, path]
    for mount in spec.mounts:
        args += ["--bind" if mount.writable else "--ro-bind", mount.source, mount.target]
    args += ["--chdir", spec.cwd]
    for name in spec.unset:
        args += ["--unsetenv", name]
    return args


def find_bwrap(bwrap: str = DEFAULT_BWRAP) -> str | None:
    """The absolute path of the bubblewrap binary ``bwrap`` names, or None when there is none."""
    if "/" in bwrap:
        return bwrap if os.path.isfile(bwrap) and os.access(bwrap, os.X_OK) else None
    return shutil.which(bwrap)


def missing_message(bwrap: str, fix: str) -> str:
    """``bubblewrap (bwrap) is not installed; install it or <fix>``."""
    name = "bwrap" if bwrap == DEFAULT_BWRAP else bwrap
    return f"bubblewrap ({name}) is not installed; install it or {fix}"


def sandbox_problem(
    bwrap: str = DEFAULT_BWRAP, fix: str = "set sandbox: none for the servers that use it"
) -> str | None:
    """Why sandboxed programs cannot run here, or None when they can (for ``talon doctor``).

    ``fix`` ends the message with what the reader can do instead. Runs a trivial program
    under bubblewrap once per binary and caches the answer.
    """
    path = find_bwrap(bwrap)
    if path is None:
        return missing_message(bwrap, fix)
    problem = _probe(path)
    return None if problem is None else f"{problem} {fix}"


@functools.lru_cache(maxsize=8)
def _probe(path: str) -> str | None:
    true = shutil.which("true", path=SYSTEM_PATH) or "/bin/true"
    cmd = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", true]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, env={"PATH": SYSTEM_PATH})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({path}) could not be run: {exc}; or"
    if done.returncode != 0:
        detail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return (
            f"bubblewrap ({path}) cannot create a sandbox here: {detail[0]}; allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1, or the AppArmor userns policy) or"
        )
    return None


def unset_names(inherited: Iterable[str], kept: Sequence[str]) -> tuple[str, ...]:
    """The inherited variable names not in ``kept``, sorted (for :attr:`SandboxSpec.unset`)."""
    return tuple(sorted(set(inherited) - set(kept)))
