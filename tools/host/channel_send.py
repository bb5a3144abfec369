"""``channel_send``: post a Markdown message into a configured channel.

The recipient is the current conversation when ``channelId`` is this thread's own
channel, otherwise the channel's ``home_chat``. The message goes through the outbox and
the target connector's renderer like any reply, and is recorded on the recipient thread
(with a note naming the sending persona and where it came from) so the persona there
sees it later.
"""

from __future__ import annotations

from typing import Any

from tools.base import HostTool, ToolContext, ToolError

MAX_CONTENT_CHARS = 20_000


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
    services = ctx.require_services("channel_send cannot deliver messages in this context")
    return await services.send_to_channel(
        channel=args["channelId"],
        markdown=content,
        origin_thread_id=ctx.thread_id,
        persona=ctx.persona.name,
        reply_to=args.get("replyTo") or None,
    )


TOOL = HostTool(
    mcp_name="channel_send",
    internal_name="channel.send",
    prefix="channel.send",
    description=(
        "Send a Markdown message to a configured Talon channel (by its name in talon.yaml). It goes to "
        "this conversation when the channel is this conversation's own, otherwise to the channel's home "
        "chat, and is converted to the platform's format automatically."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "channelId": {
                "type": "string",
                "minLength": 1,
                "description": "The configured channel name, e.g. 'team-slack' (see the Channels list).",
            },
            "content": {"type": "string", "description": "The message, in Markdown."},
            "replyTo": {
                "type": "string",
                "description": "Optional platform message or thread id in the target chat to reply to.",
            },
        },
        "required": ["channelId", "content"],
        "additionalProperties": False,
    },
    handler=handle,
    timeout=30.0,
    scope_arg="channelId",
)
