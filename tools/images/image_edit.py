"""``image_edit`` (``image.generate``): a changed picture from reference images and a prompt,
saved in /workspace and posted to the chat."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from tools.base import HostTool, ToolContext, ToolError
from tools.images.common import common_schema, deliver, images_configured, open_reference, prepare, reused
from tools.images.endpoint import call_images

__all__ = ["MAX_REFERENCES", "MAX_REFERENCE_BYTES", "TOOL"]

MAX_REFERENCES = 16
MAX_REFERENCE_BYTES = 25 * 1024 * 1024


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    paths = args.get("image_paths")
    if not isinstance(paths, list) or not paths or len(paths) > MAX_REFERENCES:
        raise ToolError(
            f"image_paths must list 1 to {MAX_REFERENCES} image paths in /workspace (PNG, JPEG or WebP), "
            'e.g. ["/workspace/inbox/12/photo.jpg"]'
        )
    cap = min(MAX_REFERENCE_BYTES, ctx.settings.images.max_image_bytes)
    references = [
        await asyncio.to_thread(open_reference, ctx, path, f"image_paths[{i}]", cap)
        for i, path in enumerate(paths)
    ]
    digests = [hashlib.sha256(data).hexdigest() for _, data in references]
    call = await prepare(ctx, "edit", args, extra_key=digests)
    earlier = await reused(ctx, call)
    if earlier is not None:
        return earlier
    picture = await call_images(call.provider, call.settings, call.params, references)
    result = await deliver(ctx, call, picture)
    result["references"] = len(references)
    return result


_SCHEMA = common_schema("edited-<id>")

TOOL = HostTool(
    mcp_name="image_edit",
    internal_name="image.edit",
    prefix="image.generate",
    description=(
        "Edit one or more existing images (PNG, JPEG or WebP in /workspace, such as a photo the user sent, or "
        "/shared when fs.read opens it) with a prompt, through the images endpoint Talon is configured with; "
        "the result is saved in /workspace and posted to this chat as a file, and its path returned. Each "
        f"reference may be at most {MAX_REFERENCE_BYTES // (1024 * 1024)} MiB. Paid like image_generate, with "
        "its own per-conversation count and the same daily limit and unattended rule."
    ),
    input_schema={
        "type": "object",
        "properties": {
            **_SCHEMA,
            "prompt": {**_SCHEMA["prompt"], "description": "What to change, add or remove."},
            "image_paths": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_REFERENCES,
                "items": {"type": "string", "minLength": 1},
                "description": "1 to 16 reference images: /workspace/... paths or relative to /workspace.",
            },
        },
        "required": ["prompt", "image_paths"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=600.0,
    available=images_configured,
)
