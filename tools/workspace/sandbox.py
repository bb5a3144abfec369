"""The workspace shell's sandbox: what a ``bash`` or ``wait_for`` command sees and may use.

The command runs as ``/bin/sh -c <command>`` under the one bubblewrap builder
(:mod:`gateway.sandbox`) with the limits of :mod:`gateway.sandbox_limits`:

- ``/workspace`` (this thread's files) bound read-write; ``/shared`` bound read-write when the
  persona holds ``fs.write:persona``, read-only when it holds only ``fs.read:persona`` or
  persona.yaml says ``workspace.read_only``, absent otherwise;
- the system directories read-only, a fresh ``/tmp``, ``/proc`` of its own PID namespace,
  no home directory, no data dir, no daemon socket;
- the environment ``PATH``, ``HOME=/workspace``, ``LANG`` and persona.yaml ``shell.env``;
- no network unless ``shell.network: true``; with ``guarded`` a network namespace holding only
  loopback and an HTTP proxy port that leads through the net_http guard
  (:mod:`tools.workspace.egress_proxy`).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.sandbox import DEFAULT_BWRAP, SYSTEM_PATH, Mount, SandboxSpec, bwrap_arguments, find_bwrap
from gateway.sandbox import sandbox_problem as _sandbox_problem
from gateway.sandbox_limits import CallCgroups, Limits, limited_command
from gateway.sandbox_namespace import NamespaceInit
from tools.base import ToolError
from tools.egress import egress_policy
from tools.workspace.egress_proxy import GuardedEgress
from tools.workspace.roots import SHARED, WORKSPACE, WorkspaceRoots, thread_workspace

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from tools.base import ToolContext

__all__ = [
    "LIMITS",
    "SandboxedCommand",
    "sandboxed_command",
    "shell_available",
    "shell_environment",
    "shell_problem",
]

LIMITS = Limits()
_FIX = "do without bash and wait_for, which are not offered until then"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_FIXED = ("PATH", "HOME")


def shell_problem(bwrap: str = DEFAULT_BWRAP) -> str | None:
    """Why the shell cannot run here (bubblewrap missing or unable to sandbox), or None."""
    return _sandbox_problem(bwrap, _FIX)


def shell_available(settings: Settings | None = None) -> bool:
    """Whether ``bash`` and ``wait_for`` are offered (the listing asks this; bubblewrap works on
    this host or not, whatever the ``settings``)."""
    return shell_problem() is None


def shell_environment(persona: Persona) -> dict[str, str]:
    """The sandbox's whole environment: PATH, HOME, LANG and ``shell.env`` (PATH and HOME fixed)."""
    env = {"LANG": "C.UTF-8"}
    env.update({k: v for k, v in persona.shell_env.items() if _NAME.match(k) and k not in _FIXED})
    env.update(PATH=SYSTEM_PATH, HOME=WORKSPACE)
    return env


def shell_mounts(ctx: ToolContext) -> tuple[Mount, ...]:
    """``/workspace`` read-write, and ``/shared`` as the persona's fs labels open it."""
    write = WorkspaceRoots.for_persona(ctx.settings, ctx.persona, ctx.thread_id, "write")
    read = WorkspaceRoots.for_persona(ctx.settings, ctx.persona, ctx.thread_id, "read")
    own = thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id)
    own.mkdir(parents=True, exist_ok=True)
    mounts = [Mount(str(own.resolve()), WORKSPACE, writable=True)]
    shared_w, shared_r = write.root(SHARED), read.root(SHARED)
    if shared_w is not None:
        mounts.append(Mount(str(shared_w.host), SHARED, writable=shared_w.writable))
    elif shared_r is not None:
        mounts.append(Mount(str(shared_r.host), SHARED, writable=False))
    return tuple(mounts)


@dataclass(slots=True)
class SandboxedCommand:
    """A command line ready to start, the environment to start it with, its cgroups, the
    handle that ends its PID namespace, and the egress proxy it reaches the network through
    (``shell.network: guarded``)."""

    argv: list[str]
    env: dict[str, str]
    cgroups: CallCgroups
    init: NamespaceInit
    egress: GuardedEgress | None = None

    def discard(self) -> None:
        """Give back what was made for a command that will not be started."""
        self.cgroups.remove()
        self.init.close()
        if self.egress is not None:
            self.egress.discard()


def sandboxed_command(
    ctx: ToolContext, command: str, *, limits: Limits = LIMITS, bwrap: str = DEFAULT_BWRAP
) -> SandboxedCommand:
    """The bubblewrap command line for ``command`` in this call's sandbox.

    Raises:
        :class:`tools.base.ToolError`: bubblewrap is missing.
    """
    path = find_bwrap(bwrap)
    if path is None:
        raise ToolError(f"bash is not available here: {shell_problem(bwrap)}")
    inner = ["/bin/sh", "-c", command]
    env = shell_environment(ctx.persona)
    if ctx.persona.shell_network == "guarded":
        egress = GuardedEgress.create(egress_policy(ctx))
        python, runtime = _forwarder_python()
        spec = SandboxSpec(mounts=(*shell_mounts(ctx), egress.mount), cwd=WORKSPACE, read_only_paths=runtime)
        inner = egress.wrap(python, inner)
        env.update(egress.environment())
    else:
        egress = None
        spec = SandboxSpec(mounts=shell_mounts(ctx), cwd=WORKSPACE, network=ctx.persona.shell_network is True)
    init = NamespaceInit()
    argv = [path, *bwrap_arguments(spec), *init.arguments(), "--", *inner]
    cgroups = CallCgroups.create(limits)
    return SandboxedCommand(limited_command(limits, argv, cgroups), env, cgroups, init, egress)


def _forwarder_python() -> tuple[str, tuple[str, ...]]:
    """A Python for the sandbox's end of the proxy, and what must be bound for it to run.

    The system's ``python3`` is already visible; otherwise the daemon's own interpreter,
    whose installation is bound read-only (the standard library is all the forwarder uses).
    """
    for candidate in ("/usr/bin/python3", "/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate, ()
    return os.path.realpath(sys.executable), (sys.base_prefix,)
