"""``channel_send``: post a Markdown message into a configured channel.

The recipient is the current conversation when ``channelId`` is this thread's own
channel, otherwise the channel's ``home_chat``. The message goes through the outbox and
the target connector's renderer like any reply, and is recorded on the recipient thread
(with a note naming the sending persona and where it came from) so the persona there
sees it later.

``attachments`` are paths in the one path space of the workspace tools (``/workspace/...``,
``/shared/...``, as the persona's ``fs.read`` labels open them), resolved by
:meth:`tools.workspace.roots.WorkspaceRoots.resolve`, so an escape is refused with the same
message as in ``read_file``. Each file is opened here and handed to the poster as an open
descriptor: what is checked is what is copied into the outbox, which uploads each file as a
message of its own after the text. A persona's reply attaches files the same way, with
``channelId`` set to this conversation's channel.
"""

from __future__ import annotations

import contextlib
import os
from contextlib import ExitStack
from typing import Any

from gateway.outbox_spool import FileSource
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular

MAX_CONTENT_CHARS = 20_000
MAX_ATTACHMENTS = 10


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Send one message; returns where it went and how many platform messages it became.

    The daemon's poster picks the recipient and words every refusal of it
    (:meth:`gateway.poster.ChannelPoster.recipient`); this handler only bounds the content.
    """
    content = args["content"]
    if len(content) > MAX_CONTENT_CHARS:
        raise ToolError(
            f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS} (send a shorter message)"
        )
    paths = args.get("attachments") or []
    if len(paths) > MAX_ATTACHMENTS:
        raise ToolError(
            f"attachments lists {len(paths)} files; at most {MAX_ATTACHMENTS} go with one message "
            "(send the rest in another call, or put them in a zip)"
        )
    services = ctx.require_services("channel_send cannot deliver messages in this context")
    with ExitStack() as opened:
        sources = [_open(ctx, path, f"attachments[{i}]", opened) for i, path in enumerate(paths)]
        return await services.send_to_channel(
            channel=args["channelId"],
            markdown=content,
            origin_thread_id=ctx.thread_id,
            persona=ctx.persona.name,
            reply_to=args.get("replyTo") or None,
            attachments=sources,
        )


def _open(ctx: ToolContext, path: str, what: str, opened: ExitStack) -> FileSource:
    """Resolve and open one attachment (closed with ``opened``); refusals name the roots."""
    roots = WorkspaceRoots.for_call(ctx, "read")
    with roots.resolved(path, what=what) as resolved:
        fd, st = open_regular(resolved, what=what)
    opened.callback(_close, fd)
    name = resolved.virtual.rsplit("/", 1)[-1]
    return FileSource(fd=fd, size=st.st_size, name=name, shown=resolved.virtual)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


TOOL = HostTool(
    mcp_name="channel_send",
    internal_name="channel.send",
    prefix="channel.send",
    description=(
        "Send a Markdown message to a configured Talon channel (by its name in talon.yaml). It goes to "
        "this conversation when the channel is this conversation's own, otherwise to the channel's home "
        "chat, and is converted to the platform's format automatically. Files from the workspace can be "
        "attached; each arrives as a native file after the text."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "channelId": {
                "type": "string",
                "minLength": 1,
                "description": "The configured channel name, e.g. 'team-slack' (see the Channels list).",
            },
            "content": {
                "type": "string",
                "description": "The message, in Markdown; may be empty when attachments are given.",
            },
            "replyTo": {
                "type": "string",
                "description": "Optional platform message or thread id in the target chat to reply to.",
            },
            "attachments": {
                "type": "array",
                "maxItems": MAX_ATTACHMENTS,
                "items": {"type": "string", "minLength": 1},
                "description": (
                    "Optional files to send, as workspace paths (/workspace/report.pdf, /shared/logo.png); "
                    "each is checked against the channel's upload limit."
                ),
            },
        },
        "required": ["channelId", "content"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=30.0,
    scope_arg="channelId",
)
