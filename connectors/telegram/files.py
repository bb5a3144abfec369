"""Downloading the files that come with an inbound message, within a size cap."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from telegram import Message
from telegram.error import TelegramError

from connectors.base import Attachment, ThreadKey
from connectors.telegram.api import TelegramBot, redact

log = logging.getLogger("talon.connectors.telegram")


@dataclass(frozen=True, slots=True)
class _Wanted:
    file_id: str
    name: str
    mime_type: str | None
    size: int | None


def human_size(n: int) -> str:
    """``30000000`` -> ``"30 MB"``; decimal units, as people read file sizes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} bytes"


def safe_name(name: str) -> str:
    """A file name that cannot leave its directory or hide itself."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"[\x00-\x1f\x7f]", "", base).strip().lstrip(".")
    return base[:150] or "file"


# Downloads of one bot at once: a polled batch's chats are taken in side by side
# (polling.py), and each download is held in memory, up to max_bytes, until it is written.
DOWNLOADS_AT_ONCE = 4


class AttachmentFetcher:
    """Downloads documents, voice notes, audio files and the largest photo size of a message.

    Files land in ``files_dir/<channel>/<chat_id>[/<topic>]/<message_id>_<name>``; a
    redelivered message overwrites its own files instead of piling up copies.

    Args:
        bot: the client used for ``getFile`` and the download.
        files_dir: the root for downloaded files.
        max_bytes: files larger than this are skipped and noted in the message text.
    """

    def __init__(self, bot: TelegramBot, files_dir: Path, max_bytes: int) -> None:
        self._bot = bot
        self._files_dir = files_dir
        self._max_bytes = max_bytes
        self._downloads = asyncio.Semaphore(DOWNLOADS_AT_ONCE)

    async def fetch(self, message: Message, key: ThreadKey) -> tuple[list[Attachment], list[str]]:
        """Download what ``message`` carries; returns the attachments and notes for skipped files."""
        attachments: list[Attachment] = []
        notes: list[str] = []
        folder = self._files_dir / key.channel / safe_name(key.chat_id)
        if key.topic:
            folder = folder / safe_name(key.topic)
        for wanted in _wanted_files(message):
            try:
                note = self._too_big(wanted.name, wanted.size)
                if note is None:
                    result = await self._download(
                        wanted, folder / safe_name(f"{message.message_id}_{wanted.name}")
                    )
                    if isinstance(result, str):
                        note = result
                    else:
                        attachments.append(result)
            except (TelegramError, OSError) as exc:
                reason = redact(str(exc), self._bot.token)
                log.warning("could not download attachment %s: %s", wanted.name, reason)
                note = f"[attachment {wanted.name} could not be downloaded: {reason}]"
            if note:
                notes.append(note)
        return attachments, notes

    def _too_big(self, name: str, size: int | None) -> str | None:
        if size is None or size <= self._max_bytes:
            return None
        return f"[attachment {name} skipped: {human_size(size)} over the {human_size(self._max_bytes)} limit]"

    async def _download(self, wanted: _Wanted, dest: Path) -> Attachment | str:
        async with self._downloads:
            tg_file = await self._bot.get_file(wanted.file_id)
            note = self._too_big(wanted.name, tg_file.file_size)
            if note:
                return note
            data = bytes(await tg_file.download_as_bytearray())
            note = self._too_big(wanted.name, len(data))
            if note:
                return note
            await asyncio.to_thread(_write, dest, data)
        return Attachment(name=wanted.name, path=str(dest), mime_type=wanted.mime_type, size=len(data))


def _wanted_files(message: Message) -> list[_Wanted]:
    wanted = []
    if message.document:
        doc = message.document
        name = safe_name(doc.file_name or f"document_{doc.file_unique_id}")
        wanted.append(_Wanted(doc.file_id, name, doc.mime_type, doc.file_size))
    if message.photo:
        best = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        wanted.append(
            _Wanted(best.file_id, safe_name(f"photo_{best.file_unique_id}.jpg"), "image/jpeg", best.file_size)
        )
    if message.voice:  # a voice note: OGG/Opus, heard before its turn (gateway/voice/hearing.py)
        voice = message.voice
        name = safe_name(f"voice_{voice.file_unique_id}.ogg")
        wanted.append(_Wanted(voice.file_id, name, voice.mime_type or "audio/ogg", voice.file_size))
    if message.audio:
        audio = message.audio
        name = safe_name(audio.file_name or f"audio_{audio.file_unique_id}.mp3")
        wanted.append(_Wanted(audio.file_id, name, audio.mime_type or "audio/mpeg", audio.file_size))
    return wanted


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(dest)
