"""The workspace tools: files, search, JSON, documents, git and the sandboxed shell.

They act only inside the path space of :mod:`tools.workspace.roots` (``/workspace``, the
thread's files, and ``/shared``, the persona's), under the ``fs.read``, ``fs.write``,
``shell.exec`` and ``git.read`` labels. ``TOOLS`` is this family's rows of
:mod:`tools.registry`, in listing order; ``instructions/`` holds the packaged instruction file
of each capability prefix, ``<prefix>.md``.
"""

from __future__ import annotations

from tools.base import HostTool
from tools.workspace import (
    edit_file,
    extract_document,
    git_read,
    glob,
    grep,
    json_query,
    list_directory,
    patch_apply,
    read_file,
    shell,
    view_image,
    wait_for,
    write_file,
)

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (
    read_file.TOOL,
    list_directory.TOOL,
    glob.TOOL,
    grep.TOOL,
    json_query.TOOL,
    extract_document.TOOL,
    view_image.TOOL,
    write_file.TOOL,
    edit_file.TOOL,
    patch_apply.TOOL,
    git_read.TOOL,
    shell.TOOL,
    wait_for.TOOL,
)
