"""``talon doctor``'s voice section: ffmpeg present where transcription or speech is configured."""

from __future__ import annotations

from gateway.config import Settings
from gateway.voice.ffmpeg import ffmpeg_missing

__all__ = ["voice_findings"]


def voice_findings(settings: Settings) -> list[tuple[str, str]]:
    """``(level, text)`` lines: nothing when no channel hears or speaks."""
    hears = [c.name for c in settings.channels if (c.transcription or settings.transcription).provider]
    speaks = [c.name for c in settings.channels if (c.speech or settings.speech).provider]
    if not hears and not speaks:
        return []
    where = ", ".join(dict.fromkeys(hears + speaks))
    problem = ffmpeg_missing()
    if problem is None:
        return [("ok", f"ffmpeg and ffprobe found for voice notes and spoken replies ({where})")]
    effect = (
        "voice notes in a format the endpoint refuses, or over transcription.max_seconds, are not "
        "transcribed (the sender is told), and spoken replies that need converting are sent as text only"
    )
    return [("warn", f"{problem}: {effect} ({where})")]
