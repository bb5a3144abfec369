"""``image_generate`` (``image.generate``): a picture from a prompt, saved in /workspace and posted to the chat."""

from __future__ import annotations

import base64
from typing import Any

from gateway.runtime.model import ImageBlock, ToolResult
from tools.base import HostTool, ToolContext
from tools.images.common import common_schema, deliver, images_configured, prepare, reused
from tools.images.endpoint import call_images
from tools.workspace.view_image import MAX_BASE64_BYTES

__all__ = ["TOOL"]


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | ToolResult:
    call = await prepare(ctx, "generate", args)
    earlier = await reused(ctx, call)
    if earlier is not None:
        return earlier
    picture = await call_images(call.provider, call.settings, call.params)
    result = await deliver(ctx, call, picture)
    if args.get("inspect") is True:
        if len(picture.data) * 4 // 3 > MAX_BASE64_BYTES:
            result.update(imageOmitted=True, reason=f"over the {MAX_BASE64_BYTES:,}-byte base64 limit")
            return result
        block = ImageBlock(f"image/{result['format']}", base64.b64encode(picture.data).decode("ascii"))
        return ToolResult(result, (block,))
    return result


_SCHEMA = common_schema("<id>")

TOOL = HostTool(
    mcp_name="image_generate",
    internal_name="image.generate",
    prefix="image.generate",
    description=(
        "Generate an image from a text prompt with the images endpoint Talon is configured with (images: in "
        "talon.yaml), save it in /workspace and post it to this chat as a file; returns its path. It is a paid "
        "call: each conversation and each day have a limit (images.per_thread, images.per_day), and it does not "
        "run in schedules or background jobs unless the persona sets images.unattended. By default the image "
        "is not attached inline for you to see (inspect: true does, within the image limits)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            **_SCHEMA,
            "prompt": {
                **_SCHEMA["prompt"],
                "description": "Description of the image: style, composition, colours, details.",
            },
            "inspect": {
                "type": "boolean",
                "description": "Attach the generated image inline. Default false.",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=600.0,
    available=images_configured,
)
