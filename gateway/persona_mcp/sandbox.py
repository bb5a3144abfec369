"""How a stdio MCP server is launched: the command line, its environment, its sandbox.

With ``sandbox: bwrap`` (the default) the server runs under bubblewrap: it sees the system
directories read-only, the persona's shared workspace (``/shared`` of the file tools, never a
thread's workspace) read-write, or read-only with ``workspace.read_only`` (its working
directory and HOME),
the Python or other runtime its command lives in read-only, a fresh ``/tmp``, and no network
unless ``network: true``. With ``sandbox: none`` it runs unconfined.

Either way it gets only the environment it is given (``env:``) plus PATH, HOME and LANG.
Values travel in the process environment, never on a command line, because any local user
can read another process's command line.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from gateway.persona_mcp.settings import StdioServerSettings
from gateway.sandbox import (
    DEFAULT_BWRAP,
    SYSTEM_PATH,
    Mount,
    SandboxError,
    SandboxSpec,
    bwrap_arguments,
    find_bwrap,
    missing_message,
    unset_names,
)
from gateway.sandbox import sandbox_problem as shared_sandbox_problem

__all__ = [
    "DEFAULT_BWRAP",
    "LaunchSpec",
    "SandboxError",
    "base_environment",
    "build_launch",
    "find_bwrap",
    "sandbox_problem",
]

_SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_FIX = "set sandbox: none for the servers that use it"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What to execute for one stdio server.

    Attributes:
        command (:obj:`str`): Absolute path of the program to execute (``bwrap`` when sandboxed).
        args (tuple[:obj:`str`, ...]): Its arguments.
        env (dict[:obj:`str`, :obj:`str`]): The environment the server itself sees.
        cwd (:class:`pathlib.Path`): The server's working directory.
        sandboxed (:obj:`bool`): Whether it runs under bubblewrap.
    """

    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    sandboxed: bool


def sandbox_problem(bwrap: str = DEFAULT_BWRAP) -> str | None:
    """Why sandboxed MCP servers cannot run here, or None when they can (for ``talon doctor``)."""
    return shared_sandbox_problem(bwrap, _FIX)


def _missing(bwrap: str, server: str) -> str:
    return missing_message(bwrap, f"set sandbox: none for {server}")


def base_environment(workspace: Path, extra_path: str | None = None) -> dict[str, str]:
    """The environment every stdio server starts from: PATH, HOME (the workspace), LANG."""
    path = f"{extra_path}:{SYSTEM_PATH}" if extra_path else SYSTEM_PATH
    return {"PATH": path, "HOME": str(workspace), "LANG": "C.UTF-8"}


def build_launch(
    settings: StdioServerSettings,
    workspace: Path,
    *,
    server: str,
    bwrap: str = DEFAULT_BWRAP,
    writable: bool = True,
) -> LaunchSpec:
    """Turn a stdio server's settings into the program to execute.

    Args:
        settings (:class:`gateway.persona_mcp.settings.StdioServerSettings`): The server's entry.
        workspace (:class:`pathlib.Path`): The persona's shared workspace; created when missing.
        server (:obj:`str`): The server's name, for messages.
        bwrap (:obj:`str`, optional): The bubblewrap binary (a name looked up on PATH, or a path).
        writable (:obj:`bool`, optional): Bind the workspace read-write (else read-only).

    Raises:
        :class:`SandboxError`: bubblewrap is missing, or the command or working directory is.
    """
    workspace = workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    cwd = workspace / settings.cwd if settings.cwd else workspace
    if not cwd.is_dir():
        raise SandboxError(f"{server}: cwd {cwd} is not a directory; create it or fix cwd")
    command = _resolve_command(settings, workspace, server)
    roots = [r for r in _runtime_roots(command) if not _overlaps(r, workspace)]
    venv_bin = next((f"{r}/bin" for r in roots if os.path.isfile(f"{r}/pyvenv.cfg")), None)
    env = {**base_environment(workspace, venv_bin), **settings.env}
    if settings.sandbox == "none":
        return LaunchSpec(*_unconfined(command, settings.args, env), env, cwd, sandboxed=False)
    bwrap_path = find_bwrap(bwrap)
    if bwrap_path is None:
        raise SandboxError(_missing(bwrap, server))
    args = _bwrap_args(settings, Mount(str(workspace), str(workspace), writable), cwd, roots, env)
    return LaunchSpec(bwrap_path, (*args, "--", command, *settings.args), env, cwd, sandboxed=True)


def _resolve_command(settings: StdioServerSettings, workspace: Path, server: str) -> str:
    command = settings.command
    if "/" not in command:
        search = settings.env.get("PATH", SYSTEM_PATH)
        found = shutil.which(command, path=search)
        if found is None:
            raise SandboxError(
                f"{server}: command {command!r} not found on PATH ({search}); give its full path"
            )
        return os.path.abspath(found)
    path = Path(command) if command.startswith("/") else workspace / command
    if not path.is_file():
        raise SandboxError(f"{server}: command {path} does not exist")
    return str(path)


def _client_environment() -> dict[str, str]:
    from mcp.client.stdio import get_default_environment  # the SDK only when a server starts

    return get_default_environment()


def _unconfined(command: str, args: list[str], env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """Run through ``env -u`` so the variables the MCP client adds on its own are removed."""
    drop = sorted(set(_client_environment()) - set(env))
    env_bin = shutil.which("env", path=SYSTEM_PATH)
    if not drop or env_bin is None:
        return command, tuple(args)
    unset = [part for name in drop for part in ("-u", name)]
    return env_bin, (*unset, "--", command, *args)


def _bwrap_args(
    settings: StdioServerSettings, workspace: Mount, cwd: Path, roots: list[str], env: dict[str, str]
) -> list[str]:
    # The MCP client adds a few of the daemon's own variables; take them out again.
    spec = SandboxSpec(
        mounts=(workspace,),
        cwd=str(cwd),
        network=settings.network,
        read_only_paths=(*roots, *settings.read_only_paths),
        unset=unset_names(_client_environment(), list(env)),
    )
    return bwrap_arguments(spec)


def _runtime_roots(command: str) -> list[str]:
    """Directories outside the system ones that ``command`` needs to run (read-only).

    A virtualenv brings its base Python; a script brings its interpreter; anything else
    brings its installation prefix (the parent of its ``bin/``).
    """
    candidates = [command]
    interpreter = _shebang(command)
    if interpreter:
        candidates.append(interpreter)
    roots: list[str] = []
    for candidate in candidates:
        for path in dict.fromkeys((candidate, os.path.realpath(candidate))):
            if _is_system(path):
                continue
            venv = _venv_of(path)
            if venv:
                roots.append(venv)
                home = _venv_home(venv)
                if home and not _is_system(home):
                    roots.append(_prefix_of(os.path.join(home, "python")))
            else:
                roots.append(_prefix_of(path))
    unique = sorted(set(roots), key=len)
    return [r for i, r in enumerate(unique) if not any(r.startswith(p + "/") for p in unique[:i])]


def _overlaps(root: str, workspace: Path) -> bool:
    """A root inside the workspace is already visible; one around it would expose its
    siblings (the threads' workspaces, other personas', the database)."""
    path = Path(root)
    return path == workspace or path in workspace.parents or workspace in path.parents


def _is_system(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in _SYSTEM_ROOTS)


def _prefix_of(path: str) -> str:
    parent = os.path.dirname(path)
    return os.path.dirname(parent) if os.path.basename(parent) == "bin" else parent


def _venv_of(path: str) -> str | None:
    folder = os.path.dirname(path)
    for _ in range(3):
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            return folder
        folder = os.path.dirname(folder)
    return None


def _venv_home(venv: str) -> str | None:
    try:
        lines = Path(venv, "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return os.path.realpath(value.strip())
    return None


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").split()
    if not parts:
        return None
    # "#!/usr/bin/env python3" names its interpreter by PATH lookup.
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return shutil.which(parts[1], path=SYSTEM_PATH)
    return parts[0]
