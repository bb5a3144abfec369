"""``extract_document`` (``fs.read``): the text of a docx, xlsx, pptx, pdf or zip in the workspace.

The file is read through the one resolver (:mod:`tools.workspace.roots`) and extracted by
:mod:`gateway.documents` in a worker thread with a time bound: 4 MB decompression cap, zip
member paths kept inside the archive, nothing written to disk, no shell, 512 KB of text.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from gateway.documents import MAX_OUTPUT, DocumentError, extract_bounded, kind_of
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular

__all__ = ["MAX_INPUT_BYTES", "TOOL", "read_limited"]

MAX_INPUT_BYTES = 50 * 1024 * 1024


def read_limited(roots: WorkspaceRoots, path: Any, limit: int) -> tuple[str, bytes]:
    """``(virtual path, bytes)`` of a regular file under the roots, refused past ``limit`` bytes."""
    with roots.resolved(path, what="file_path") as resolved:
        fd, st = open_regular(resolved)
    try:
        if st.st_size > limit:
            raise ToolError(
                f"file_path {resolved.virtual!r} is {st.st_size:,} bytes, over the {limit:,}-byte limit of "
                "this tool; ask for a smaller file"
            )
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return resolved.virtual, b"".join(chunks)[:limit]
    finally:
        os.close(fd)


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    roots = WorkspaceRoots.for_call(ctx, "read")
    virtual, data = await asyncio.to_thread(read_limited, roots, args["file_path"], MAX_INPUT_BYTES)
    kind = kind_of(virtual)
    if kind is None:
        raise ToolError(
            f"{virtual!r} is not a .docx, .xlsx, .pptx, .pdf or .zip file; read text files with read_file "
            "and images with view_image"
        )
    try:
        found = await extract_bounded(data, kind)
    except DocumentError as exc:
        raise ToolError(f"{virtual}: {exc}") from None
    result: dict[str, Any] = {"path": virtual, "type": kind, "size": len(data), "text": found.text}
    if found.pages is not None:
        result["parts"] = found.pages
    if found.truncated:
        result["truncated"] = True
        result["note"] = f"the text was cut at {MAX_OUTPUT // 1024} KB"
    return result


TOOL = HostTool(
    mcp_name="extract_document",
    internal_name="fs.extract_document",
    prefix="fs.read",
    description=(
        "Extract text from binary document formats that read_file rejects: .docx, .xlsx, .pptx, .pdf "
        "and .zip in /workspace or /shared. Extraction has a 4 MB decompression cap, ZIP path "
        "containment, and no shell execution. Output is capped at 512 KB."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path to the document file."},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=60.0,
)
