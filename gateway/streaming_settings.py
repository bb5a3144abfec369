"""The streaming keys every channel has: how replies appear while the model writes.

:class:`gateway.channel_settings.ChannelBase` inherits them; a binding's ``streaming``
overrides the channel's for its chat.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.model_types import StrictModel

StreamingMode = Literal["off", "edit", "native"]


class StreamingKeys(StrictModel):
    streaming: StreamingMode | None = Field(
        None,
        description=(
            "off: the reply arrives whole; edit: a plain-text preview is edited as the model writes, "
            "then replaced by the formatted reply; native: the platform's own streaming (Telegram drafts "
            "in private chats, Slack chat streams), else edit; null = edit in DMs, off in groups"
        ),
    )
    stream_interval: float = Field(
        1.0,
        ge=0.2,
        le=60,
        description="fewest seconds between two preview edits in one chat (platform minimums still apply)",
    )
    stale_preview: Literal["delete", "mark"] = Field(
        "delete",
        description="a preview a crash or failure left behind: delete it, or mark it as interrupted",
    )
    tool_status: dict[str, str] = Field(
        {},
        description=(
            "status shown while a tool runs, by tool name or capability prefix "
            "(e.g. bash: Running a command…); overrides the tool families' defaults"
        ),
    )

    def streaming_for(self, chat_type: str, override: StreamingMode | None = None) -> StreamingMode:
        """The mode for a chat of ``chat_type``: a binding's override, the channel's setting, or
        the default (edit in DMs, off elsewhere)."""
        if override is not None:
            return override
        if self.streaming is not None:
            return self.streaming
        return "edit" if chat_type == "dm" else "off"
