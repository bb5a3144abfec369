"""Walking a checked folder by descriptors: entries are opened relative to their parent with
``O_NOFOLLOW``, so a link never takes the walk out of the roots, and the walk is bounded."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_VISITED", "SKIPPED_DIRS", "Entry", "walk"]

MAX_VISITED = 200_000
SKIPPED_DIRS = frozenset({".git", "node_modules", ".hg", ".svn"})
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry: its path relative to the walk's start, and ``lstat``."""

    relative: str
    st: os.stat_result

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)


def walk(fd: int, *, skip: frozenset[str] = SKIPPED_DIRS, limit: int = MAX_VISITED) -> Iterator[Entry]:
    """Every entry under the open folder ``fd`` (not closed here), folders before their content.

    Stops after ``limit`` entries; the caller learns that from the count it sees.
    """
    seen = 0
    stack: list[tuple[int, str, bool]] = [(os.dup(fd), "", True)]
    try:
        while stack:
            dir_fd, prefix, _ = stack.pop()
            try:
                with os.scandir(dir_fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for item in entries:
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    seen += 1
                    if seen > limit:
                        return
                    relative = prefix + item.name
                    yield Entry(relative, st)
                    if stat.S_ISDIR(st.st_mode) and item.name not in skip:
                        try:
                            child = os.open(item.name, _DIR, dir_fd=dir_fd)
                        except OSError:
                            continue
                        stack.append((child, relative + "/", True))
            finally:
                os.close(dir_fd)
    finally:
        for dir_fd, _, _ in stack:
            os.close(dir_fd)
