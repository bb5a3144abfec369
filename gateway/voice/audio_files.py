"""Which inbound files are audio, and an audio file made ready for a transcription endpoint.

A voice note the endpoint takes as it is (Telegram's and Discord's OGG/Opus, MP3, WAV, ...),
within the duration and size caps, is sent unchanged: its duration is read from the OGG pages
(:mod:`.ogg`) without starting a process. Anything else (a format the endpoint refuses, a note
over ``max_seconds`` or ``max_bytes``) goes through ffmpeg to mono OGG/Opus, cut to the cap.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.voice.ffmpeg import AudioToolError, duration_of, to_ogg_opus
from gateway.voice.ogg import ogg_duration
from gateway.voice_settings import TranscriptionSettings

__all__ = ["ReadyAudio", "is_audio", "ready_for_transcription"]

# What OpenAI's /audio/transcriptions takes (and compatible servers after it).
ACCEPTED = frozenset({".flac", ".m4a", ".mp3", ".mp4", ".mpeg", ".mpga", ".oga", ".ogg", ".wav", ".webm"})
AUDIO_SUFFIXES = ACCEPTED | {".opus", ".aac", ".amr", ".aif", ".aiff", ".wma", ".caf", ".3gp"}
_OGG = frozenset({".ogg", ".oga", ".opus"})
_MIMES = {
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
}


def is_audio(entry: dict[str, Any]) -> bool:
    """An inbound attachment entry (as stored on its message) holds sound: an ``audio/*`` type,
    or an audio file name with no telling type."""
    mime = str(entry.get("mime_type") or "").lower()
    if mime.startswith("audio/"):
        return True
    suffix = PurePosixPath(str(entry.get("name") or "")).suffix.lower()
    return mime in ("", "application/octet-stream", "video/ogg") and suffix in AUDIO_SUFFIXES


@dataclass(frozen=True, slots=True)
class ReadyAudio:
    data: bytes
    filename: str
    mime: str
    seconds: float  # the length of the original
    cut_at: float | None  # the cap it was cut to, None when whole
    converted: bool


async def ready_for_transcription(path: Path, name: str, settings: TranscriptionSettings) -> ReadyAudio:
    """``path`` as bytes the endpoint takes, within the caps.

    Raises:
        AudioToolError: It is not audio ffmpeg can read, or still too big after conversion.
        OSError: It cannot be read.
    """
    suffix = PurePosixPath(name).suffix.lower()
    size = (await asyncio.to_thread(path.stat)).st_size
    seconds = await asyncio.to_thread(ogg_duration, path) if suffix in _OGG else None
    if seconds is None:
        try:
            seconds = await duration_of(path)
        except AudioToolError:
            raise AudioToolError("it could not be read as audio") from None
    cut_at = settings.max_seconds if seconds > settings.max_seconds else None
    if suffix in ACCEPTED and cut_at is None and size <= settings.max_bytes:
        data = await asyncio.to_thread(path.read_bytes)
        return ReadyAudio(data, name, _MIMES.get(suffix, "application/octet-stream"), seconds, None, False)
    data = await to_ogg_opus(path, max_seconds=cut_at, limit=settings.max_bytes)
    return ReadyAudio(data, f"{PurePosixPath(name).stem or 'voice'}.ogg", "audio/ogg", seconds, cut_at, True)
