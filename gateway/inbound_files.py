"""Inbound files move into their thread's workspace: ``/workspace/inbox/<message id>/<name>``.

Connectors download a message's files before the gateway knows its thread, into the
staging folder ``<data_dir>/files``. Intake then works in three durable steps:

1. Before the commit, each staged file is synced to disk (:func:`sync_staged`).
2. The commit stores the message with, for each file, its final path as the model sees it
   (``path``) and where it still is (``staged``): :func:`plan`.
3. After the commit, each file is renamed into the thread's workspace, the folders are
   synced, and the message is stored again without ``staged`` (:func:`place`). At start, the
   gateway finishes what a stop or crash interrupted (``Pipeline.recover``): a file still in
   staging is moved, one already moved is only recorded. A committed message therefore never
   names a file that is nowhere, and no file is lost between download and move.

Names: ``inbox/<message id>/<name>``. The message id is unique and fixed by the commit,
so the destination is known before anything moves (recovery needs no guess), two messages
never collide, a redelivered event (deduplicated) never adds a copy (what it downloaded again
is removed from staging), and the sender's file name is kept as it was, extension included. Two files of one message with the same name
become ``name``, ``name-2``, ... (before the extension).

The move never follows a link: the sandboxed shell can put a symbolic link at ``inbox`` or
below, so each folder is opened relative to the one before with ``O_NOFOLLOW``, and a file
that cannot be placed (``inbox`` is not a folder, the disk is full) stays in staging with a
note on the message instead of a path.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.workspaces import WORKSPACE

__all__ = ["INBOX", "inbox_name", "place", "plan", "remove_staged", "sync_staged"]

log = logging.getLogger("talon.intake")

INBOX = "inbox"
MAX_NAME = 150
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def inbox_name(name: str) -> str:
    """A file name that stays in its folder and shows: no separators, control characters or
    leading dots, at most :data:`MAX_NAME` characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"[\x00-\x1f\x7f]", "", base).strip().lstrip(".")
    return base[:MAX_NAME] or "file"


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, number = name, 1
        while candidate in seen:
            number += 1
            path = PurePosixPath(name)
            candidate = f"{path.stem}-{number}{path.suffix}" if path.stem else f"{name}-{number}"
        seen.add(candidate)
        out.append(candidate)
    return out


def plan(files: Sequence[dict[str, Any]], message_id: int) -> list[dict[str, Any]]:
    """The entries stored at commit: ``path`` is the final ``/workspace/inbox/...`` path and
    ``staged`` the host path the file still has."""
    names = _unique(inbox_name(str(f.get("name") or "file")) for f in files)
    return [
        {**f, "path": f"{WORKSPACE}/{INBOX}/{int(message_id)}/{name}", "staged": f["path"]}
        for f, name in zip(files, names, strict=True)
    ]


def sync_staged(paths: Iterable[str]) -> None:
    """fsync each staged file and its folder, so a committed message's files survive a power
    loss (blocking; connectors write them without syncing)."""
    folders: set[str] = set()
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # missing: the move records it as lost, not this step
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        folders.add(os.path.dirname(path))
    for folder in folders:
        _sync_folder(folder)


def remove_staged(paths: Iterable[str]) -> None:
    """Delete staged downloads no message will move (those of a redelivered event)."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove a redelivered download: %s", _why(exc), extra={"path": path})


def place(workspace: Path, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move each staged entry's file to its ``path`` under ``workspace`` (the thread's
    folder on the host); returns the entries to store (blocking).

    An entry already placed (no ``staged``) is kept as it is. One whose file is already at its
    destination (moved before a crash) only loses ``staged``. One that cannot be placed gets
    ``path: None`` and a ``note`` and its file stays in staging.
    """
    out = []
    for entry in entries:
        staged = entry.get("staged")
        if not staged:
            out.append(entry)
            continue
        done = {k: v for k, v in entry.items() if k != "staged"}
        try:
            _move(Path(staged), workspace, PurePosixPath(entry["path"]))
        except OSError as exc:
            why = _why(exc)
            log.warning("an inbound file stays in %s: %s", staged, why)
            done["path"] = None
            done["note"] = f"could not be put in the workspace ({why})"
        out.append(done)
    return out


def _move(staged: Path, workspace: Path, virtual: PurePosixPath) -> None:
    parts = virtual.relative_to(WORKSPACE).parts
    folders, name = parts[:-1], parts[-1]
    workspace.mkdir(parents=True, exist_ok=True)
    fds = [os.open(workspace, _DIR_FLAGS)]
    try:
        for folder in folders:
            fds.append(_open_folder(fds[-1], folder))
        target = fds[-1]
        try:
            os.rename(staged, name, dst_dir_fd=target)
        except FileNotFoundError:
            if not os.path.lexists(staged) and _is_file(name, target):
                return  # moved before a crash; only the record was missing
            raise
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            _copy_in(staged, name, target)
        for fd in fds[-2:]:
            os.fsync(fd)  # the new name and the folders created for it
        _sync_folder(str(staged.parent))
    finally:
        for fd in fds:
            os.close(fd)


def _open_folder(parent: int, name: str) -> int:
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotADirectoryError(errno.ENOTDIR, f"{name} in the workspace is not a folder") from None
        raise


def _is_file(name: str, folder: int) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _copy_in(staged: Path, name: str, folder: int) -> None:
    """The move when staging and the workspace are on different file systems."""
    tmp = f".{name}.part"
    with open(staged, "rb") as source:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=folder)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(source, out)
            out.flush()
            os.fsync(out.fileno())
    os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    os.fsync(folder)
    staged.unlink()


def _sync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the downloaded file is missing"
    return exc.strerror or str(exc)
