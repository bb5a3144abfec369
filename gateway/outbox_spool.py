"""The outbox's private copies of files to deliver: ``<data_dir>/outbox/files/``.

A file row must send the bytes that were attached, not whatever the workspace holds when
the row's turn comes (a later edit, a deletion, a shell replacing the file). So the copy is
made before the row is committed, from the descriptor the caller opened and checked, and
made durable (fsync of the file and its folder) so a committed row never names a copy a
crash lost. A hard link would be cheaper but shares the inode, so an in-place edit of the
workspace file would still change it, and the workspace file would then have two links,
which the file tools refuse to read.

A copy lives while its row is ``pending`` or ``sending``; :meth:`FileSpool.discard` removes
it when the row's delivery ends, and :meth:`FileSpool.sweep` removes copies no open row
names (a crash between the copy and the commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import mimetypes
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import RefusedError
from gateway.store.outbox import OutboxFile

__all__ = ["FileSource", "FileSpool", "FileTooLargeError"]

log = logging.getLogger("talon.outbox")

_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileSource:
    """A file a caller opened and checked: a readable descriptor (the caller closes it), its
    size when checked, the name the chat shows, and what to call it in messages
    (``/workspace/report.pdf``)."""

    fd: int
    size: int
    name: str
    shown: str


class FileTooLargeError(RefusedError):
    """The file grew past the limit while it was being copied (the poster words the refusal)."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"grew past {limit} bytes while it was being copied")
        self.size = size
        self.limit = limit


class FileSpool:
    """The folder of copies. All blocking work runs in a worker thread."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def beside(cls, database_path: Path) -> FileSpool:
        """The spool of the data dir that holds ``database_path``."""
        return cls(Path(database_path).parent / "outbox" / "files")

    async def take(self, source: FileSource, limit: int) -> OutboxFile:
        """Copy ``source`` into the spool (at most ``limit`` bytes); returns the row's payload.

        Raises:
            FileTooLargeError: It holds more than ``limit`` bytes (the copy is removed).
        """
        return await asyncio.to_thread(self._copy, source, limit)

    def _copy(self, source: FileSource, limit: int) -> OutboxFile:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self.root / uuid.uuid4().hex
        digest = hashlib.sha256()
        size = 0
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            offset = 0
            while True:
                block = os.pread(source.fd, _CHUNK, offset)
                if not block:
                    break
                offset += len(block)
                size += len(block)
                if size > limit:
                    raise FileTooLargeError(size, limit)
                digest.update(block)
                _write_all(out, block)
            os.fsync(out)
        except BaseException:
            os.close(out)
            target.unlink(missing_ok=True)
            raise
        os.close(out)
        _fsync_dir(self.root)
        mime, _ = mimetypes.guess_type(source.name)
        return OutboxFile(str(target), source.name, size, digest.hexdigest(), mime)

    async def discard(self, paths: Iterable[str]) -> None:
        """Remove copies whose rows are done (or never committed)."""
        wanted = [p for p in paths if p]
        if wanted:
            await asyncio.to_thread(self._remove, wanted)

    def _remove(self, paths: list[str]) -> None:
        for path in paths:
            if Path(path).parent != self.root:
                continue  # never delete outside the spool, whatever a row says
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    async def sweep(self, keep: set[str]) -> int:
        """Remove every copy not in ``keep`` (those of open rows); returns how many went."""
        return await asyncio.to_thread(self._sweep, keep)

    def _sweep(self, keep: set[str]) -> int:
        if not self.root.is_dir():
            return 0
        gone = [str(p) for p in self.root.iterdir() if str(p) not in keep]
        self._remove(gone)
        if gone:
            log.info("removed %d spooled file(s) no outbox row needs", len(gone))
        return len(gone)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
