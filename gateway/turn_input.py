"""What the model reads in a turn: the system prompt (persona, channels, tool instructions,
summary, hot memory, skills) and the transcript (recent messages with their pictures, then
the batch's scheduled or delegated tasks), with its size in tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.config import Settings
from gateway.memory_scopes import hot_memory_section, memory_keys
from gateway.personas import Persona
from gateway.queue import Batch
from gateway.runtime.context import ChannelInfo, build_transcript, estimate_tokens, system_prompt
from gateway.runtime.inbound_images import transcript_images
from gateway.runtime.model import ChatMessage
from gateway.skills import skill_entries, skills_section
from gateway.store.db import Database
from gateway.store.messages import MessageRow
from gateway.store.threads import ThreadRow
from gateway.workspaces import thread_workspace

__all__ = ["TurnInput", "turn_input"]


@dataclass(frozen=True, slots=True)
class TurnInput:
    system: str
    messages: list[ChatMessage]  # roles alternate, as every provider wants
    tokens: int  # the transcript's estimated size: past the summarizer's threshold, it is summarized


async def turn_input(
    db: Database,
    settings: Settings,
    *,
    batch: Batch,
    thread: ThreadRow,
    persona: Persona,
    summary: str | None,
    rows: Sequence[MessageRow],
    sender_id: str | None,
    channels: Sequence[ChannelInfo],
    tool_instructions: Sequence[str],
) -> TurnInput:
    keys = memory_keys(
        persona.capabilities,
        persona=persona.name,
        thread_id=thread.id,
        channel=thread.channel,
        sender_id=sender_id,
    )
    memory = await db.read(hot_memory_section, list(keys.values())) if keys else None
    skills = None
    if "skill.use" in persona.capabilities:  # names and descriptions only, until skill loads one
        listed = list(zip(persona.skills, persona.skill_descriptions, strict=True))
        skills = skills_section(await db.read(skill_entries, persona.name, listed))
    system = system_prompt(
        persona,
        timezone=settings.timezone,
        channels=channels,
        current_channel=thread.channel,
        tool_instructions=tool_instructions,
        summary=summary,
        memory=memory,
        skills=skills,
    )
    provider_settings = settings.providers.get(persona.provider)
    vision = provider_settings is not None and provider_settings.accepts_images(persona.model)
    workspace = thread_workspace(settings, persona.name, batch.thread_id)
    images = await asyncio.to_thread(transcript_images, rows, workspace, vision=vision)
    messages = build_transcript(
        rows, budget_tokens=settings.agent.context_tokens, show_names=thread.chat_type != "dm", images=images
    )
    for item in batch.items:
        if item.kind != "message":
            messages.append(ChatMessage("user", _task_text(item.kind, item.payload)))
    tokens = sum(estimate_tokens(m.content) for m in messages)
    return TurnInput(system, _alternate(messages), tokens)


def _task_text(kind: str, payload: dict[str, Any]) -> str:
    if kind == "schedule":
        label = f" «{payload['label']}»" if payload.get("label") else ""
        return f"[scheduled task{label}] {payload.get('prompt', '')}"
    return f"[{kind}] {payload.get('text') or payload.get('prompt') or ''}"


def _alternate(messages: list[ChatMessage]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for m in messages:
        if out and out[-1].role == m.role:
            last = out[-1]
            out[-1] = ChatMessage(m.role, last.content + "\n\n" + m.content, images=last.images + m.images)
        else:
            out.append(m)
    return out
