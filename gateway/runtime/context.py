"""Context assembly: the system prompt and the recent transcript within a token budget."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.personas import Persona
from gateway.runtime.inbound_images import IMAGE_TOKENS, RowImages
from gateway.runtime.model import ChatMessage, ImageBlock
from gateway.store.messages import MessageRow, newest_messages
from gateway.voice.notes import voice_note_text

# A deliberately simple estimate: good enough to keep a transcript inside a budget
# without a tokenizer per provider.
CHARS_PER_TOKEN = 4
# The most messages a turn's transcript is picked from (the budget usually stops sooner).
TRANSCRIPT_MESSAGES = 500


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    name: str
    type: str
    home_chat: str | None


def system_prompt(
    persona: Persona,
    *,
    timezone: str,
    channels: Sequence[ChannelInfo],
    current_channel: str,
    tool_instructions: Sequence[str] = (),
    summary: str | None = None,
    now: datetime | None = None,
    memory: str | None = None,
    skills: str | None = None,
) -> str:
    """persona system.md + personality + tool instructions + channels + time + hot memory
    (``memory``, a section of its own) + the skills' names and descriptions (``skills``) + summary."""
    moment = (now or datetime.now(ZoneInfo(timezone))).astimezone(ZoneInfo(timezone))
    parts = [persona.system_prompt, *persona.personality, *tool_instructions]
    lines = [
        f"- {c.name} ({c.type})" + (" — this conversation" if c.name == current_channel else "")
        for c in channels
    ]
    parts.append("## Channels\n" + "\n".join(lines))
    parts.append(f"## Current time\n{moment:%A %Y-%m-%d %H:%M} ({timezone})")
    if memory:
        parts.append(memory)
    if skills:
        parts.append(skills)
    if summary:
        parts.append("## Summary of the earlier conversation\n" + summary)
    return "\n\n".join(p for p in parts if p)


def transcript_rows(
    conn: sqlite3.Connection, thread_id: int, *, context_from: int, upto_message_id: int | None = None
) -> list[MessageRow]:
    """The thread's messages after ``context_from``, newest first (database thread).

    User messages after ``upto_message_id`` belong to a later turn and are left out.
    """
    return newest_messages(
        conn, thread_id, after=context_from, limit=TRANSCRIPT_MESSAGES, upto_message_id=upto_message_id
    )


def build_transcript(
    rows: Sequence[MessageRow],
    *,
    budget_tokens: int,
    show_names: bool = True,
    images: Mapping[int, RowImages] | None = None,
) -> list[ChatMessage]:
    """The newest of ``rows`` (newest first) that fit the budget, oldest first.

    Consecutive messages of one role are merged (providers want alternating roles), and
    the transcript always starts with a user message. ``images`` (by message id, from
    :func:`gateway.runtime.inbound_images.transcript_images`) adds each message's images and
    their notes; an image counts :data:`~gateway.runtime.inbound_images.IMAGE_TOKENS`.
    """
    picked: list[tuple[str, str, tuple[ImageBlock, ...]]] = []
    spent = 0
    for row in rows:
        text = _render_row(row, show_names)
        shown = (images or {}).get(row.id)
        blocks: tuple[ImageBlock, ...] = ()
        if shown is not None:
            text = "\n".join([text, *shown.notes])
            blocks = shown.blocks
        cost = estimate_tokens(text) + IMAGE_TOKENS * len(blocks)
        if picked and spent + cost > budget_tokens:
            break
        picked.append(("assistant" if row.role == "assistant" else "user", text, blocks))
        spent += cost
    picked.reverse()
    merged: list[ChatMessage] = []
    for role, text, blocks in picked:
        if merged and merged[-1].role == role:
            last = merged[-1]
            merged[-1] = ChatMessage(role, last.content + "\n\n" + text, images=last.images + blocks)  # type: ignore[arg-type]
        else:
            merged.append(ChatMessage(role, text, images=blocks))  # type: ignore[arg-type]
    if merged and merged[0].role != "user":
        # Providers want a user turn first; keep what the bot posted (notifications too).
        merged.insert(0, ChatMessage("user", "[earlier in this chat]"))
    return merged


def _render_row(row: MessageRow, show_names: bool) -> str:
    role, name, text, attachments = row.role, row.sender_name, row.text, row.attachments
    if role == "system":
        return f"[system] {text}"
    if role == "assistant":
        return text
    out = text
    if attachments:
        files = json.loads(attachments)
        # path: /workspace/inbox/... for a routed message's files (read_file takes it as is).
        out += (
            "\n[attachments: " + ", ".join(f"{a['name']} ({a['path'] or a.get('note')})" for a in files) + "]"
        )
        for a in files:
            if a.get("excerpt") and a["path"]:
                kind = a.get("mime_type") or a["name"].rsplit(".", 1)[-1]
                out += (
                    f"\n[document {a['path']} ({kind}, {a.get('size', 0):,} bytes) begins:]\n{a['excerpt']}"
                )
            voice = voice_note_text(a)
            if voice is not None:
                out += "\n" + voice
    return f"[{name}] {out}" if name and show_names else out
