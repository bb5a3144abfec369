"""The Bot API's data (chats, messages, files, updates) and its message methods.

:class:`BotApiState` is what the fake server serves; it knows nothing about HTTP.
Handlers take the request parameters and return the ``result`` or raise :class:`ApiError`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

from tests.fakes.telegram_api.entities import HtmlParseError, parse_html, utf16_len
from tests.fakes.telegram_api.messages import (
    ReceivedFile,
    SentMessage,
    StoredFile,
    chat_object,
    photo_sizes,
    user_object,
)

MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_DOWNLOAD = 20 * 1024 * 1024
MAX_UPLOAD = 50 * 1024 * 1024
MAX_PHOTO = 10 * 1024 * 1024
# What Telegram can decode as a photo, by its first bytes.
_PICTURE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"RIFF")
CHAT_ACTIONS = frozenset({"typing", "upload_photo", "upload_document", "record_voice", "choose_sticker"})


class ApiError(Exception):
    """An error response: HTTP status, Telegram's description, optional parameters."""

    def __init__(self, status: int, description: str, parameters: dict[str, Any] | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def bad_request(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


class BotApiState:
    """Chats, messages, files and pending updates of one bot, and the message methods.

    Args:
        token: the bot token; its numeric prefix is the bot's user id.
        bot_username: the bot's @username (without @).
    """

    def __init__(self, token: str, bot_username: str) -> None:
        self.token = token
        self.bot_id = int(token.split(":", 1)[0])
        self.bot_username = bot_username
        self.bot_user = user_object(self.bot_id, is_bot=True, first_name="Talon", username=bot_username)
        self._signal = asyncio.Event()  # replaced on every change; waiters hold the old one
        self._updates: list[dict[str, Any]] = []
        self._injected: dict[int, dict[str, Any]] = {}
        self._update_ids = itertools.count(500_001)
        self._chats: dict[int | str, dict[str, Any]] = {}
        self._messages: dict[int | str, dict[int, dict[str, Any]]] = defaultdict(dict)
        self._message_ids: dict[int | str, itertools.count[int]] = defaultdict(lambda: itertools.count(1))
        self._sent: dict[int | str, list[SentMessage]] = defaultdict(list)
        self._actions: dict[int | str, list[tuple[str, int | None, float]]] = defaultdict(list)
        self._files: dict[str, StoredFile] = {}
        self._file_ids = itertools.count(1)
        self.received_files: list[ReceivedFile] = []
        self.drafts: list[tuple[int | str, int, str, float]] = []  # (chat, draft_id, text, monotonic)

    def add_chat(
        self, chat_id: int, chat_type: str = "private", *, forum: bool = False, user_id: int | None = None
    ) -> dict[str, Any]:
        """Make a chat known (the bot can only send to chats it has seen)."""
        if chat_id in self._chats:
            return self._chats[chat_id]
        user = user_object(
            user_id or chat_id, is_bot=False, first_name=f"User{user_id or chat_id}", username=None
        )
        self._chats[chat_id] = chat_object(chat_id, chat_type, forum=forum, user=user)
        return self._chats[chat_id]

    async def get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False}

    async def send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        thread_id = self._thread(chat, params)
        reply_id = self._reply_target(chat, params)
        raw = params.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise bad_request("message text is empty")
        text, entities = formatted(raw, params.get("parse_mode"), params.get("entities"))
        if not text.strip():
            raise bad_request("message text is empty")
        if utf16_len(text) > MAX_TEXT:
            raise bad_request("message is too long")
        return self._record(chat, text, raw, params.get("parse_mode"), entities, thread_id, reply_id)

    async def edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        message_id = int(params.get("message_id") or 0)
        sent = next((m for m in self._sent[chat["id"]] if m.message_id == message_id), None)
        if sent is None or sent.deleted:
            raise bad_request("message to edit not found")
        raw = params.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise bad_request("message text is empty")
        text, entities = formatted(raw, params.get("parse_mode"), params.get("entities"))
        if utf16_len(text) > MAX_TEXT:
            raise bad_request("message is too long")
        if text == sent.text and entities == sent.entities:
            raise bad_request(
                "message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message"
            )
        sent.versions.append(sent.text)
        sent.text, sent.raw_text, sent.entities = text, raw, entities
        sent.parse_mode = params.get("parse_mode")
        sent.edits += 1
        sent.edit_times.append(time.monotonic())
        self._wake()
        message = self._messages[chat["id"]][message_id]
        message.update({"text": text, "entities": entities, "edit_date": int(time.time())})
        return message

    async def delete_message(self, params: dict[str, Any]) -> bool:
        chat = self._chat(params.get("chat_id"))
        message_id = int(params.get("message_id") or 0)
        sent = next((m for m in self._sent[chat["id"]] if m.message_id == message_id), None)
        if sent is None or sent.deleted:
            raise bad_request("message to delete not found")
        sent.deleted = True
        self._messages[chat["id"]].pop(message_id, None)
        self._wake()
        return True

    async def send_message_draft(self, params: dict[str, Any]) -> bool:
        """A draft of a reply in a private chat: shown while it grows, gone once a message is sent."""
        chat = self._chat(params.get("chat_id"))
        if chat.get("type") != "private":
            raise bad_request("TEXTDRAFT_PEER_INVALID")
        draft_id = int(params.get("draft_id") or 0)
        if draft_id == 0:
            raise bad_request("invalid draft_id specified")
        raw = params.get("text") or ""
        text, _ = formatted(raw, params.get("parse_mode"), params.get("entities"))
        if utf16_len(text) > MAX_TEXT:
            raise bad_request("message is too long")
        self.drafts.append((chat["id"], draft_id, text, time.monotonic()))
        self._wake()
        return True

    async def send_chat_action(self, params: dict[str, Any]) -> bool:
        chat = self._chat(params.get("chat_id"))
        thread_id = self._thread(chat, params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        self._actions[chat["id"]].append((action, thread_id, time.monotonic()))
        return True

    async def send_photo(self, params: dict[str, Any]) -> dict[str, Any]:
        """A multipart photo upload: refused unless it looks like a picture, as Telegram does."""
        chat = self._chat(params.get("chat_id"))
        thread_id = self._thread(chat, params)
        reply_id = self._reply_target(chat, params)
        photo = params.get("photo")
        if not isinstance(photo, dict):
            raise bad_request("there is no photo in the request")
        content = photo["content"]
        if len(content) > MAX_PHOTO:
            raise bad_request("PHOTO_SAVE_FILE_INVALID")
        if not content.startswith(_PICTURE_MAGIC):
            raise bad_request("IMAGE_PROCESS_FAILED")
        stored = self._store_file(content, "photos", photo["filename"], photo["content_type"])
        message = self._record(chat, "", "", None, [], thread_id, reply_id)
        message["photo"] = photo_sizes([stored])
        self._received(chat["id"], "sendPhoto", photo, message["message_id"])
        return message

    async def send_voice(self, params: dict[str, Any]) -> dict[str, Any]:
        """A multipart voice upload: refused unless it is OGG/Opus, which Telegram plays as voice."""
        chat = self._chat(params.get("chat_id"))
        thread_id = self._thread(chat, params)
        reply_id = self._reply_target(chat, params)
        voice = params.get("voice")
        if not isinstance(voice, dict):
            raise bad_request("there is no voice in the request")
        content = voice["content"]
        if len(content) > MAX_UPLOAD:
            raise ApiError(413, "Request Entity Too Large")
        if not (content.startswith(b"OggS") and b"OpusHead" in content[:512]):
            raise bad_request("VOICE_FORMAT_INVALID")
        stored = self._store_file(content, "voice", voice["filename"], "audio/ogg")
        message = self._record(chat, "", "", None, [], thread_id, reply_id)
        message["voice"] = {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "duration": 1}
        self._received(chat["id"], "sendVoice", voice, message["message_id"])
        return message

    async def send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params.get("chat_id"))
        thread_id = self._thread(chat, params)
        reply_id = self._reply_target(chat, params)
        document = params.get("document")
        if isinstance(document, dict) and len(document["content"]) > MAX_UPLOAD:
            raise ApiError(413, "Request Entity Too Large")
        if isinstance(document, dict):
            stored = self._store_file(
                document["content"],
                "documents",
                document["filename"],
                document["content_type"],
            )
        elif isinstance(document, str) and document in self._files:
            stored = self._files[document]
        else:
            raise bad_request("there is no document in the request")
        raw = params.get("caption") or ""
        caption, entities = formatted(raw, params.get("parse_mode"), params.get("caption_entities"))
        if utf16_len(caption) > MAX_CAPTION:
            raise bad_request("message caption is too long")
        doc = {"file_name": stored.file_name, "size": len(stored.content), "file_id": stored.file_id}
        message = self._record(
            chat, caption, raw, params.get("parse_mode"), entities, thread_id, reply_id, doc
        )
        if isinstance(document, dict):
            self._received(chat["id"], "sendDocument", document, message["message_id"])
        return message

    def _received(self, chat_id: int | str, method: str, upload: dict[str, Any], message_id: int) -> None:
        content = upload["content"]
        digest = hashlib.sha256(content).hexdigest()
        self.received_files.append(
            ReceivedFile(chat_id, method, upload["filename"], len(content), digest, message_id)
        )

    async def get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        stored = self._files.get(str(params.get("file_id")))
        if stored is None:
            raise bad_request("invalid file_id")
        if len(stored.content) > MAX_DOWNLOAD:
            raise bad_request("file is too big")
        return stored.as_api()

    def _wake(self) -> None:
        signal, self._signal = self._signal, asyncio.Event()
        signal.set()

    def _chat(self, chat_id: Any) -> dict[str, Any]:
        if isinstance(chat_id, str) and chat_id.lstrip("-").isdigit():
            chat_id = int(chat_id)
        chat = self._chats.get(chat_id)
        if chat is None:
            raise bad_request("chat not found")
        return chat

    @staticmethod
    def _thread(chat: dict[str, Any], params: dict[str, Any]) -> int | None:
        thread_id = params.get("message_thread_id")
        if thread_id is None:
            return None
        if not chat.get("is_forum"):
            raise bad_request("message thread not found")
        return int(thread_id)

    def _reply_target(self, chat: dict[str, Any], params: dict[str, Any]) -> int | None:
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            message_id, lenient = reply.get("message_id"), bool(reply.get("allow_sending_without_reply"))
        else:
            message_id, lenient = (
                params.get("reply_to_message_id"),
                bool(params.get("allow_sending_without_reply")),
            )
        if message_id is None:
            return None
        if int(message_id) in self._messages[chat["id"]]:
            return int(message_id)
        if lenient:
            return None
        raise bad_request("message to be replied not found")

    def _record(
        self,
        chat: dict[str, Any],
        text: str,
        raw: str,
        parse_mode: str | None,
        entities: list[dict[str, Any]],
        thread_id: int | None,
        reply_id: int | None,
        document: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        chat_id = chat["id"]
        message_id = next(self._message_ids[chat_id])
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot_user,
        }
        if document is not None:
            message["document"] = {
                "file_id": document["file_id"],
                "file_unique_id": document["file_id"],
                "file_name": document["file_name"],
            }
            if text:
                message["caption"] = text
        else:
            message["text"] = text
        if entities:
            message["caption_entities" if document is not None else "entities"] = entities
        if thread_id is not None:
            message.update({"message_thread_id": thread_id, "is_topic_message": True})
        if reply_id is not None:
            message["reply_to_message"] = self._messages[chat_id][reply_id]
        self._messages[chat_id][message_id] = message
        self._sent[chat_id].append(
            SentMessage(chat_id, message_id, text, raw, parse_mode, entities, thread_id, reply_id, document)
        )
        self._wake()
        return message

    def _last_bot_message(self, chat_id: int, chat: dict[str, Any]) -> dict[str, Any]:
        for message in reversed(self._messages[chat_id].values()):
            if message.get("from", {}).get("id") == self.bot_id:
                return message
        message_id = next(self._message_ids[chat_id])
        message = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot_user,
            "text": "(earlier answer)",
        }
        self._messages[chat_id][message_id] = message
        return message

    def _store_file(self, content: bytes, folder: str, name: str | None, mime: str | None) -> StoredFile:
        """Keep a file for getFile; its path looks like Telegram's (``documents/file_3.pdf``)."""
        n = next(self._file_ids)
        suffix = PurePosixPath(name or "").suffix
        suffix = suffix if suffix[1:].isalnum() else ""
        stored = StoredFile(f"FILE{n:06d}", f"U{n:06d}", content, f"{folder}/file_{n}{suffix}", name, mime)
        self._files[stored.file_id] = stored
        return stored


def formatted(raw: str, parse_mode: Any, entities: Any) -> tuple[str, list[dict[str, Any]]]:
    """The visible text and entities of ``raw`` under ``parse_mode``, as Telegram parses it."""
    if parse_mode in (None, ""):
        return raw, list(entities or [])
    if str(parse_mode).lower() != "html":
        raise bad_request("unsupported parse_mode")
    try:
        return parse_html(raw)
    except HtmlParseError as exc:
        raise bad_request(f"can't parse entities: {exc}") from None
