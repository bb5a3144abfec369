"""The one path space of the workspace tools: ``/workspace`` and ``/shared``.

The model sees two roots. ``/workspace`` is the thread's workspace,
``<data_dir>/workspaces/<persona>/threads/<thread_id>/``; ``/shared`` is the persona's,
``<data_dir>/workspaces/<persona>/shared/`` or the folder ``workspace.path`` of persona.yaml
(read-only when ``workspace.read_only`` is true). Which roots a call may use follows from the
persona's ``fs.read`` / ``fs.write`` labels through :data:`gateway.labels.WORKSPACE_SCOPES`;
:class:`WorkspaceRoots` is that decision for one call, and :meth:`WorkspaceRoots.resolve` is
the one way every tool turns a path argument into something it may open.

How a path is resolved, and why:

- A relative path is relative to ``/workspace``. An absolute path must start with one of the
  call's roots; any other absolute path (``/etc/passwd``, ``/proc/self/root``, the host path
  of the data dir, ``~/.ssh``) is refused with the allowed roots named.
- The walk is openat-style: each component is opened relative to the descriptor of the
  directory before it with ``O_NOFOLLOW``, and the caller opens the last one relative to its
  parent's descriptor. A directory swapped for a symbolic link between the check and the open
  (the sandboxed shell runs beside the file tools) makes the open fail instead of leaving the
  root: there is no window between checking a path and using it.
- ``..`` is physical (the parent of the directory actually reached) and cannot climb above a
  root. A symbolic link is followed by the walk itself: a relative target continues from the
  link's directory, an absolute target is read in the model's path space (``/workspace/...``
  or ``/shared/...``, which is what a link made inside the sandbox holds) and must name a root
  the call may use. At most 40 links are followed.
- Only regular files and directories are used: a device, FIFO or socket is refused (files are
  opened with ``O_NONBLOCK`` so a FIFO cannot hang the call before the check).
- A regular file with more than one hard link is refused for reading: its other name may lie
  outside the workspace (the data dir, a home directory), and the name cannot tell. Replacing
  such a file with ``write_file`` is allowed, since the atomic rename gives the path a new
  file and leaves the other name untouched.

Tools that hand a path to a child process (ripgrep, git, pdftotext) use
:attr:`Resolved.host_path` of a checked path and must not let the child follow links out
(ripgrep does not follow links unless told to).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from gateway.workspaces import SHARED, WORKSPACE, opened_roots, shared_workspace, thread_workspace
from tools.base import ToolError

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from tools.base import ToolContext

__all__ = [
    "SHARED",
    "WORKSPACE",
    "Access",
    "Resolved",
    "Root",
    "WorkspaceRoots",
    "shared_workspace",
    "thread_workspace",
]

MAX_LINKS = 40
MAX_PATH_CHARS = 4096

Access = Literal["read", "write"]
_PREFIX: dict[Access, str] = {"read": "fs.read", "write": "fs.write"}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DESCRIBE = {WORKSPACE: "this thread's files", SHARED: "the persona's shared files"}


@dataclass(frozen=True, slots=True)
class Root:
    """One root of the path space.

    Attributes:
        name (:obj:`str`): What the model calls it, ``/workspace`` or ``/shared``.
        host (:class:`pathlib.Path`): The directory on the host, links resolved.
        writable (:obj:`bool`): Whether a write call may change files under it.
    """

    name: str
    host: Path
    writable: bool


@dataclass(slots=True)
class Resolved:
    """A checked path: the parent directory held open and the last component's name.

    Open the file with :meth:`open` (relative to ``parent_fd``, never by its host path) and
    close the descriptor with :meth:`close`, or use :meth:`WorkspaceRoots.resolved` as a
    context manager.

    Attributes:
        root (:class:`Root`): The root the path ends in (after links).
        virtual (:obj:`str`): The path as the model sees it, links resolved (``/workspace/a.txt``).
        parent_fd (:obj:`int`): An open descriptor of the directory holding the last component.
        name (:obj:`str`): The last component (``"."`` for a root itself).
        st (:class:`os.stat_result` | :obj:`None`): ``lstat`` of the last component, ``None``
            when it does not exist.
    """

    root: Root
    virtual: str
    parent_fd: int
    name: str
    st: os.stat_result | None

    @property
    def exists(self) -> bool:
        return self.st is not None

    @property
    def is_dir(self) -> bool:
        return self.st is not None and stat.S_ISDIR(self.st.st_mode)

    @property
    def host_path(self) -> Path:
        """The host path (for a child process that does not follow links)."""
        relative = PurePosixPath(self.virtual).relative_to(self.root.name)
        return self.root.host / relative

    def open(self, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
        """``os.open`` of the last component relative to its parent, never following a link."""
        return os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.parent_fd)

    def close(self) -> None:
        if self.parent_fd >= 0:
            os.close(self.parent_fd)
            self.parent_fd = -1


@dataclass(frozen=True, slots=True)
class WorkspaceRoots:
    """The roots one call may use, and the one resolver of path arguments.

    Attributes:
        roots (tuple[:class:`Root`, ...]): The usable roots, ``/workspace`` first.
        access (:obj:`str`): ``read`` or ``write``: what the call does with the paths.
    """

    roots: tuple[Root, ...]
    access: Access

    @classmethod
    def for_call(cls, ctx: ToolContext, access: Access) -> WorkspaceRoots:
        """The roots of a tool call, from the persona's ``fs.read`` or ``fs.write`` labels."""
        return cls.for_persona(ctx.settings, ctx.persona, ctx.thread_id, access)

    @classmethod
    def for_persona(
        cls, settings: Settings, persona: Persona, thread_id: int, access: Access
    ) -> WorkspaceRoots:
        """The roots ``persona`` may ``access`` in ``thread_id``; the directories are created."""
        names = opened_roots(persona.capabilities, _PREFIX[access])
        roots = []
        if WORKSPACE in names:
            roots.append(Root(WORKSPACE, _ready(thread_workspace(settings, persona.name, thread_id)), True))
        if SHARED in names:
            host = shared_workspace(settings, persona)
            roots.append(
                Root(SHARED, _ready(host, create=persona.shared_path is None), not persona.shared_read_only)
            )
        return cls(tuple(roots), access)

    @classmethod
    def for_subagent(cls, settings: Settings, persona: Persona, thread_id: int) -> WorkspaceRoots:
        """What a sub-agent invoked from ``thread_id`` may read: that thread's ``/workspace``
        always, ``/shared`` only when the persona's ``fs.read`` labels open it."""
        read = cls.for_persona(settings, persona, thread_id, "read")
        if read.root(WORKSPACE) is not None:
            return read
        own = Root(WORKSPACE, _ready(thread_workspace(settings, persona.name, thread_id)), True)
        return cls((own, *read.roots), "read")

    # ------------------------------------------------------------ messages

    def describe(self) -> str:
        """The allowed roots in words, for refusals (``/workspace (this thread's files)``)."""
        if not self.roots:
            return "no workspace roots (the persona has no fs.read or fs.write label)"
        parts = []
        for root in self.roots:
            note = _DESCRIBE.get(root.name, "")
            if self.access == "write" and not root.writable:
                note += ", read-only"
            parts.append(f"{root.name} ({note})" if note else root.name)
        return " and ".join(parts)

    def _refuse(self, what: str, path: str, why: str) -> ToolError:
        return ToolError(
            f"{what} {_show(path)} {why}; this call may use {self.describe()}: "
            f"send a path under {self.roots[0].name if self.roots else WORKSPACE}, e.g. "
            f"{(self.roots[0].name if self.roots else WORKSPACE)}/notes.txt"
        )

    # ------------------------------------------------------------ resolution

    def root(self, name: str) -> Root | None:
        return next((r for r in self.roots if r.name == name), None)

    def virtual_parts(self, path: object, *, what: str = "path") -> tuple[Root, list[str]]:
        """Split a path argument into its root and the components after it (not yet walked)."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError(f"{what} must be a non-empty string such as {WORKSPACE}/notes.txt")
        if "\x00" in path or len(path) > MAX_PATH_CHARS:
            raise ToolError(f"{what} must be a path of at most {MAX_PATH_CHARS} characters without NUL bytes")
        if not self.roots:
            raise ToolError(f"{what}: this persona may use {self.describe()}")
        text = path.strip()
        if text == "~" or text.startswith("~/"):
            raise self._refuse(what, path, "is in a home directory, which the tools cannot reach")
        if not text.startswith("/"):
            if self.root(WORKSPACE) is None:
                raise self._refuse(what, path, f"is relative to {WORKSPACE}, which this call may not use")
            return self.roots[0], [p for p in text.split("/") if p not in ("", ".")]
        for root in self.roots:
            if text == root.name or text.startswith(root.name + "/"):
                rest = text[len(root.name) :]
                return root, [p for p in rest.split("/") if p not in ("", ".")]
        if text in (WORKSPACE, SHARED) or text.startswith((WORKSPACE + "/", SHARED + "/")):
            raise self._refuse(what, path, "is in a root this persona's labels do not open")
        raise self._refuse(what, path, "is outside the workspace")

    def resolve(
        self,
        path: object,
        *,
        what: str = "path",
        follow_last: bool = True,
        create_parents: bool = False,
        missing_parents_ok: bool = False,
    ) -> Resolved:
        """Check ``path`` and hold its parent open.

        Args:
            path: The model's path argument (absolute under a root, or relative to /workspace).
            what: How refusals name the argument (``file_path``).
            follow_last: Follow a symbolic link in the last component (within the roots).
            create_parents: Create missing parent directories (write calls).
            missing_parents_ok: Accept missing parent directories without creating them: the
                result does not exist and its ``name`` is the missing rest (to check a later write).

        Returns:
            :class:`Resolved`: The caller must :meth:`Resolved.close` it.

        Raises:
            :class:`tools.base.ToolError`: The path leaves the roots, a parent is missing or not a
                directory, it is a device or FIFO, or the root is read-only for a write call.
        """
        root, parts = self.virtual_parts(path, what=what)
        walk = _Walk(self, root, what, str(path), create_parents, missing_parents_ok)
        try:
            resolved = walk.run(parts, follow_last)
        except BaseException:
            walk.close_all()
            raise
        if self.access == "write" and not resolved.root.writable:
            resolved.close()
            raise ToolError(
                f"{what} {_show(str(path))} is in {resolved.root.name}, which is read-only for this persona "
                f"(workspace.read_only in persona.yaml); write under {WORKSPACE} instead"
            )
        return resolved

    @contextmanager
    def resolved(self, path: object, **kwargs: bool | str) -> Iterator[Resolved]:
        """:meth:`resolve` as a context manager that closes the held directory."""
        item = self.resolve(path, **kwargs)  # type: ignore[arg-type]
        try:
            yield item
        finally:
            item.close()

    def virtual_of(self, host: Path) -> str | None:
        """The model's name of a host path under a root (for results), or ``None``."""
        for root in self.roots:
            if host == root.host or host.is_relative_to(root.host):
                rest = host.relative_to(root.host).as_posix()
                return root.name if rest == "." else f"{root.name}/{rest}"
        return None


class _Walk:
    """One openat-style walk: a stack of open directory descriptors from a root down."""

    def __init__(
        self, roots: WorkspaceRoots, root: Root, what: str, shown: str, create: bool, missing_ok: bool = False
    ) -> None:
        self.roots = roots
        self.missing_ok = missing_ok
        self.what = what
        self.shown = shown
        self.create = create
        self.links = 0
        self.root = root
        self.names: list[str] = []
        self.fds: list[int] = [_open_root(root)]

    def close_all(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def _enter_root(self, root: Root) -> None:
        self.close_all()
        self.root = root
        self.names = []
        self.fds = [_open_root(root)]

    def _refuse(self, why: str) -> ToolError:
        return self.roots._refuse(self.what, self.shown, why)

    def run(self, parts: list[str], follow_last: bool) -> Resolved:
        pending = list(reversed(parts))  # a stack: the next component is pending[-1]
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(self.fds) == 1:
                    raise self._refuse(f"climbs above {self.root.name} with '..'")
                os.close(self.fds.pop())
                self.names.pop()
                continue
            last = not any(p not in ("", ".") for p in pending)
            try:
                st = os.stat(name, dir_fd=self.fds[-1], follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    return self._result(name, None)
                if self.missing_ok and not self.create:
                    return self._missing(name, pending)
                if not self.create:
                    raise ToolError(
                        f"{self.what} {_show(self.shown)}: the folder {self._virtual(name)} does not exist; "
                        "list_directory shows what is there"
                    ) from None
                _mkdir(name, self.fds[-1])
                st = os.stat(name, dir_fd=self.fds[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                self._follow(name, pending)
                continue
            if last:
                return self._result(name, st)
            if not stat.S_ISDIR(st.st_mode):
                raise ToolError(
                    f"{self.what} {_show(self.shown)}: {self._virtual(name)} is a file, not a folder"
                )
            self._descend(name)
        return self._result(".", os.stat(".", dir_fd=self.fds[-1], follow_symlinks=False))

    def _missing(self, name: str, pending: list[str]) -> Resolved:
        """A path whose folders do not exist yet (checked for a later write that creates them)."""
        rest = [name, *reversed([p for p in pending if p not in ("", ".")])]
        if ".." in rest:
            raise self._refuse("uses '..' below a folder that does not exist")
        virtual = "/".join([self._virtual(), *rest])
        parent = self.fds.pop()
        self.close_all()
        return Resolved(self.root, virtual, parent, "/".join(rest), None)

    def _descend(self, name: str) -> None:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fds[-1])
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or file meanwhile
                raise ToolError(
                    f"{self.what} {_show(self.shown)}: {self._virtual(name)} changed while it was "
                    "being opened; try again"
                ) from None
            raise
        self.fds.append(fd)
        self.names.append(name)

    def _follow(self, name: str, pending: list[str]) -> None:
        self.links += 1
        if self.links > MAX_LINKS:
            raise self._refuse(f"goes through more than {MAX_LINKS} symbolic links")
        target = os.readlink(name, dir_fd=self.fds[-1])
        if target.startswith("/"):
            root = next(
                (r for r in self.roots.roots if target == r.name or target.startswith(r.name + "/")),
                None,
            )
            if root is None:
                raise self._refuse(f"is a symbolic link ({self._virtual(name)} -> {target}) pointing outside")
            self._enter_root(root)
            target = target[len(root.name) :]
        pending.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))

    def _virtual(self, name: str = "") -> str:
        parts = [*self.names, name] if name and name != "." else self.names
        return "/".join([self.root.name, *parts])

    def _result(self, name: str, st: os.stat_result | None) -> Resolved:
        if st is not None and not (
            stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)
        ):
            kind = _kind(st.st_mode)
            raise ToolError(
                f"{self.what} {_show(self.shown)} is {kind}; the file tools read and write only regular "
                "files and folders"
            )
        parent = self.fds.pop()
        self.close_all()
        self.fds = []
        return Resolved(self.root, self._virtual(name), parent, name, st)


def _open_root(root: Root) -> int:
    try:
        return os.open(root.host, _DIR_FLAGS)
    except FileNotFoundError:
        raise ToolError(f"{root.name} is not available: its folder {root.host} is missing") from None


def _mkdir(name: str, dir_fd: int) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
    except FileExistsError:
        pass


def _ready(path: Path, *, create: bool = True) -> Path:
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


def _show(path: str) -> str:
    return repr(path if len(path) <= 200 else path[:200] + "...")


def check_regular(resolved: Resolved, fd: int, *, what: str = "file_path") -> os.stat_result:
    """``fstat`` of a descriptor opened from ``resolved``: a regular file with one link, or a refusal."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{what} {resolved.virtual!r} is a folder; list_directory or glob shows its files")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(
            f"{what} {resolved.virtual!r} is {_kind(st.st_mode)}; send the path of a regular file"
        )
    if st.st_nlink > 1:
        raise ToolError(
            f"{what} {resolved.virtual!r} has {st.st_nlink} hard links, and another of its names may be "
            "outside the workspace, so it is not read; ask for a copy of the file made outside the tools"
        )
    return st


def open_regular(resolved: Resolved, *, what: str = "file_path") -> tuple[int, os.stat_result]:
    """Open an existing checked file for reading: ``(fd, fstat)``; the caller closes ``fd``."""
    if not resolved.exists:
        raise ToolError(
            f"{what} {resolved.virtual!r} does not exist; list_directory or glob shows the files there"
        )
    try:
        fd = resolved.open(os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(
                f"{what} {resolved.virtual!r} changed while it was being opened; try again"
            ) from None
        raise ToolError(f"{what} {resolved.virtual!r} cannot be opened: {exc.strerror}") from None
    try:
        st = check_regular(resolved, fd, what=what)
    except BaseException:
        os.close(fd)
        raise
    return fd, st
