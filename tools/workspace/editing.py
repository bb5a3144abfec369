"""What edit_file and patch_apply share: reading a file whole for a change, checking
``expected_hash``, and replacing exact text."""

from __future__ import annotations

import os
import re
from typing import Any

from tools.base import ToolError
from tools.workspace.atomic import MAX_WRITE_BYTES, content_hash
from tools.workspace.read_file import binary_refusal
from tools.workspace.roots import Resolved, open_regular

__all__ = ["check_hash", "read_for_edit", "replace_exact"]

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


def read_for_edit(resolved: Resolved, *, what: str = "file_path") -> bytes:
    """The whole content of an existing text file, at most the write limit."""
    fd, st = open_regular(resolved, what=what)
    try:
        if st.st_size > MAX_WRITE_BYTES:
            raise ToolError(
                f"{what} {resolved.virtual!r} is {st.st_size} bytes, more than the {MAX_WRITE_BYTES}-byte "
                "limit for edits; change it with bash (sed, a script) instead"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)[: MAX_WRITE_BYTES + 1]
    finally:
        os.close(fd)
    if b"\x00" in data[:8192]:
        raise binary_refusal(resolved.virtual)
    return data


def decode(data: bytes, virtual: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_refusal(virtual) from None


def check_hash(expected: Any, data: bytes | None, virtual: str, *, what: str = "expected_hash") -> None:
    """Refuse when ``expected`` (``sha256:<hex>``, or empty to skip) is not the hash of ``data``."""
    if expected is None or expected == "":
        return
    if not isinstance(expected, str) or not _HASH.match(expected):
        raise ToolError(
            f"{what} must be sha256:<64 hex digits> copied verbatim from a prior tool result "
            "(after_hash), or empty to skip the check; do not compute or guess a hash"
        )
    actual = content_hash(data) if data is not None else None
    if actual != expected:
        now = "does not exist" if actual is None else f"now has {actual}"
        raise ToolError(
            f"{virtual!r} changed since {expected} was read: it {now}; read_file it again and "
            "redo the change against what is there"
        )


def replace_exact(
    text: str, old: str, new: str, *, replace_all: bool, virtual: str, label: str
) -> tuple[str, int]:
    """``text`` with ``old`` replaced by ``new``: exactly once, or everywhere with ``replace_all``."""
    if old == "":
        raise ToolError(f"{label} is empty; copy the exact text to replace from read_file's output")
    if old == new:
        raise ToolError(f"{label} and its replacement are the same; there is nothing to change")
    count = text.count(old)
    if count == 0:
        hint = " (it has Windows line endings: include the \\r)" if "\r\n" in text and "\r" not in old else ""
        raise ToolError(
            f"{label} was not found in {virtual!r}{hint}; read_file it and copy the text exactly, "
            "whitespace and indentation included"
        )
    if count > 1 and not replace_all:
        lines = _lines_of(text, old)
        raise ToolError(
            f"{label} matches {count} places in {virtual!r} (lines {lines}); include more of the "
            "surrounding text so it matches once, or set replace_all to change every one"
        )
    return text.replace(old, new), count


def _lines_of(text: str, old: str, shown: int = 5) -> str:
    found = []
    start = 0
    while len(found) < shown:
        at = text.find(old, start)
        if at < 0:
            break
        found.append(str(text.count("\n", 0, at) + 1))
        start = at + 1
    return ", ".join(found) + (", ..." if text.count(old) > shown else "")
