"""Builders for the Bot API objects the fake hands out (users, chats, messages, files)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.telegram_api.entities import auto_entities

CHAT_TYPES = ("private", "group", "supergroup", "channel")


@dataclass
class SentMessage:
    """A message the bot sent, as the user sees it.

    ``text`` is the visible text after Telegram parsed ``raw_text`` with ``parse_mode``;
    ``entities`` are the formatting spans Telegram derived (UTF-16 offsets).
    """

    chat_id: int | str
    message_id: int
    text: str
    raw_text: str
    parse_mode: str | None
    entities: list[dict[str, Any]]
    message_thread_id: int | None = None
    reply_to_message_id: int | None = None
    document: dict[str, Any] | None = None
    edits: int = 0
    sent_at: float = field(default_factory=time.monotonic)
    edit_times: list[float] = field(default_factory=list)  # time.monotonic() of each edit
    versions: list[str] = field(default_factory=list)  # the visible text before each edit
    deleted: bool = False

    def entity_types(self) -> set[str]:
        return {e["type"] for e in self.entities}


@dataclass(frozen=True)
class ReceivedFile:
    """A file the bot uploaded (``sendDocument`` / ``sendPhoto`` with multipart bytes)."""

    chat_id: int | str
    method: str
    name: str | None
    size: int
    sha256: str
    message_id: int


@dataclass
class StoredFile:
    file_id: str
    file_unique_id: str
    content: bytes
    file_path: str
    file_name: str | None = None
    mime_type: str | None = None

    def as_api(self) -> dict[str, Any]:
        return {
            "file_id": self.file_id,
            "file_unique_id": self.file_unique_id,
            "file_size": len(self.content),
            "file_path": self.file_path,
        }


def user_object(user_id: int, *, is_bot: bool, first_name: str, username: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
    if username:
        user["username"] = username
    return user


def chat_object(chat_id: int, chat_type: str, *, forum: bool, user: dict[str, Any]) -> dict[str, Any]:
    if chat_type not in CHAT_TYPES:
        raise ValueError(f"chat_type must be one of {', '.join(CHAT_TYPES)}")
    if chat_type == "private":
        chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
        if "username" in user:
            chat["username"] = user["username"]
        return chat
    chat = {"id": chat_id, "type": chat_type, "title": f"Chat {chat_id}"}
    if forum:
        chat["is_forum"] = True
    return chat


def text_fields(text: str, entities: list[dict[str, Any]] | None, *, caption: bool) -> dict[str, Any]:
    """``text``/``entities`` or, for a message with a file, ``caption``/``caption_entities``."""
    found = auto_entities(text) if entities is None else entities
    key, ekey = ("caption", "caption_entities") if caption else ("text", "entities")
    fields: dict[str, Any] = {}
    if text or not caption:
        fields[key] = text
    if found:
        fields[ekey] = found
    return fields


def photo_sizes(stored: list[StoredFile]) -> list[dict[str, Any]]:
    """PhotoSize objects, smallest first, as Telegram lists them."""
    sizes = []
    for n, f in enumerate(stored, start=1):
        side = 90 * n * n
        sizes.append(
            {
                "file_id": f.file_id,
                "file_unique_id": f.file_unique_id,
                "file_size": len(f.content),
                "width": side,
                "height": side,
            }
        )
    return sizes
