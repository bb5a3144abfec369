"""``view_image`` (``fs.read``): a PNG, JPEG, GIF or WebP in the workspace, shown to the model.

The kind comes from the file's bytes (:mod:`gateway.image_format`), never its name,
and the whole file is checked before it is sent: a truncated file or one with something
appended is refused with what to do. An image over :data:`MAX_SIDE` pixels on a side, over
:data:`MAX_PIXELS` in all (a small file can claim a huge canvas; nothing here decodes it, but
the model's API would), or whose base64 form is over :data:`MAX_BASE64_BYTES` comes back as
metadata with ``imageOmitted`` instead of pixels. The image itself travels as a
:class:`gateway.runtime.model.ImageBlock` beside the JSON metadata; the provider sends it as
image content, or only the metadata to a model that takes no images.
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

from gateway.image_format import ImageFormatError, ImageInfo, inspect
from gateway.runtime.model import ImageBlock, ToolResult
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular

__all__ = ["MAX_BASE64_BYTES", "MAX_PIXELS", "MAX_SIDE", "TOOL", "view_image"]

MAX_SIDE = 8000
MAX_PIXELS = 40_000_000
MAX_BASE64_BYTES = 2 * 1024 * 1024
MAX_INLINE_BYTES = MAX_BASE64_BYTES // 4 * 3  # the largest file whose base64 fits
HEADER_BYTES = 1024 * 1024  # read for the dimensions of a file too large to send


def _read(roots: WorkspaceRoots, path: Any) -> tuple[str, int, bytes]:
    """``(virtual path, size, bytes)``: the whole file when it can be sent, else its first part."""
    with roots.resolved(path, what="file_path") as resolved:
        fd, st = open_regular(resolved)
    try:
        want = MAX_INLINE_BYTES + 1 if st.st_size <= MAX_INLINE_BYTES else HEADER_BYTES
        chunks: list[bytes] = []
        left = want
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return resolved.virtual, st.st_size, b"".join(chunks)
    finally:
        os.close(fd)


def _omitted(meta: dict[str, Any], reason: str) -> dict[str, Any]:
    return {**meta, "imageOmitted": True, "reason": reason}


def _describe(virtual: str, size: int, data: bytes) -> tuple[dict[str, Any], ImageInfo | None]:
    complete = len(data) == size and size <= MAX_INLINE_BYTES
    if not data:
        raise ToolError(f"file_path {virtual!r} is empty; send the path of a PNG, JPEG, GIF or WebP file")
    try:
        info = inspect(data, complete=complete)
    except ImageFormatError as exc:
        raise ToolError(
            f"file_path {virtual!r} {exc}; view_image shows PNG, JPEG, GIF and WebP files as they are: "
            "send another file, or use bash to repair or convert this one first"
        ) from None
    meta: dict[str, Any] = {"path": virtual, "type": info.media_type, "size": size}
    meta.update(width=info.width, height=info.height)
    if info.frames is not None:
        meta["frames"] = info.frames
    return meta, info if complete else None


def view_image(roots: WorkspaceRoots, path: Any) -> ToolResult:
    """The image at ``path`` as metadata and, within the limits, an :class:`ImageBlock`."""
    virtual, size, data = _read(roots, path)
    meta, info = _describe(virtual, size, data)
    if info is None:
        base64_size = (size + 2) // 3 * 4
        return ToolResult(
            _omitted(
                meta,
                f"the file is {size:,} bytes ({base64_size:,} in base64), over the "
                f"{MAX_BASE64_BYTES:,}-byte base64 limit; make a smaller copy with bash and view that",
            )
        )
    if max(info.width, info.height) > MAX_SIDE:
        return ToolResult(
            _omitted(meta, f"it is over {MAX_SIDE:,} pixels on a side; view a scaled-down copy instead")
        )
    if info.width * info.height > MAX_PIXELS:
        return ToolResult(
            _omitted(meta, f"it has over {MAX_PIXELS:,} pixels in all; view a scaled-down copy instead")
        )
    return ToolResult(meta, (ImageBlock(info.media_type, base64.b64encode(data).decode("ascii")),))


async def handle(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    roots = WorkspaceRoots.for_call(ctx, "read")
    return await asyncio.to_thread(view_image, roots, args["file_path"])


TOOL = HostTool(
    mcp_name="view_image",
    internal_name="fs.view_image",
    prefix="fs.read",
    description=(
        "Read a local PNG, JPEG, GIF or WebP file in /workspace or /shared and attach it for visual "
        f"inspection (the kind is read from the file's bytes). Images over {MAX_SIDE:,} pixels in either "
        f"dimension or the {MAX_BASE64_BYTES // (1024 * 1024)} MiB base64 limit return text metadata with "
        "imageOmitted instead of pixels; a model that takes no images gets the metadata (type, size, "
        "dimensions) only. Inline images use much context: view an image to inspect it, not in a loop."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "Path to the image: /workspace/..., /shared/..., or relative to /workspace.",
            },
        },
        "required": ["file_path"],
        "additionalProperties": False,
    },
    handler=handle,
)
