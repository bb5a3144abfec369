"""Writing a checked file atomically, and the content hash every write returns.

A write goes to a temporary file in the same folder (opened relative to the folder's held
descriptor), is flushed with ``fsync``, and replaces the target with one ``rename``; the folder
is synced after. A reader sees the old content or the new, never a mix, and a crash leaves at
most a stray ``.*.tmp`` file beside the target.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat

from tools.base import ToolError
from tools.workspace.roots import Resolved

__all__ = ["MAX_WRITE_BYTES", "content_hash", "write_atomic"]

MAX_WRITE_BYTES = 16 * 1024 * 1024


def content_hash(data: bytes) -> str:
    """``sha256:<hex>``, the form ``expected_hash`` takes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_atomic(resolved: Resolved, data: bytes, *, what: str = "file_path") -> str:
    """Replace the file ``resolved`` names with ``data``; returns its :func:`content_hash`."""
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(
            f"{what} {resolved.virtual!r}: {len(data)} bytes is more than the {MAX_WRITE_BYTES}-byte limit "
            "of one write; write the file in parts (write_file, then edit_file to append)"
        )
    if resolved.name == "." or resolved.is_dir:
        raise ToolError(f"{what} {resolved.virtual!r} is a folder; give the path of a file inside it")
    mode = 0o644
    if resolved.st is not None:
        if stat.S_ISLNK(resolved.st.st_mode):
            raise ToolError(f"{what} {resolved.virtual!r} is a symbolic link; write to the file it names")
        mode = stat.S_IMODE(resolved.st.st_mode)
    temp = f".{resolved.name[:200]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        mode,
        dir_fd=resolved.parent_fd,
    )
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, resolved.name, src_dir_fd=resolved.parent_fd, dst_dir_fd=resolved.parent_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=resolved.parent_fd)
        except OSError:
            pass
        raise
    os.fsync(resolved.parent_fd)
    return content_hash(data)
