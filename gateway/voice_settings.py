"""``transcription:`` and ``speech:`` in talon.yaml: voice notes in, spoken replies out.

Both go through an OpenAI-compatible provider (``type: openai`` under ``providers``):
``/audio/transcriptions`` for voice notes and audio files, ``/audio/speech`` for spoken
replies. The top-level settings apply to every channel; a channel's own ``transcription`` or
``speech`` replaces them for that channel (:class:`VoiceKeys`). Unset ``provider`` = off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from gateway.model_types import StrictModel

__all__ = ["SpeechSettings", "TranscriptionSettings", "VoiceKeys", "voice_problems"]


class TranscriptionSettings(StrictModel):
    provider: str | None = Field(
        None,
        description="a providers entry of type openai whose /audio/transcriptions hears voice notes; "
        "null = off (the sender is told, the persona gets the audio file)",
    )
    model: str = Field("whisper-1", description="the transcription model")
    language: str | None = Field(None, description="ISO-639-1 code of the spoken language; null = detected")
    echo: bool = Field(False, description="post the transcript back (Heard: …) so the sender can check it")
    timeout: float = Field(60.0, gt=0, le=600, description="seconds per transcription call")
    max_attempts: int = Field(
        3, ge=1, le=10, description="tries on a network error, 429 or 5xx, then the notice"
    )
    max_seconds: float = Field(
        600.0, gt=0, le=7200, description="longer audio is cut to this many seconds before it is sent"
    )
    max_bytes: int = Field(
        25_000_000, ge=10_000, description="audio larger than this (after conversion) is not sent"
    )


class SpeechSettings(StrictModel):
    provider: str | None = Field(
        None,
        description="a providers entry of type openai whose /audio/speech speaks replies; "
        "null = replies are text only",
    )
    model: str = Field("tts-1", description="the speech model")
    voice: str = Field("alloy", description="the voice name the endpoint knows")
    speak: Literal["voice_notes", "all"] = Field(
        "voice_notes", description="voice_notes: replies to messages with a voice note; all: every reply"
    )
    max_chars: int = Field(
        1500, ge=1, le=4096, description="a longer reply is spoken up to here (cut at a sentence) and noted"
    )
    timeout: float = Field(60.0, gt=0, le=600, description="seconds per speech call")


class VoiceKeys(StrictModel):
    """The voice keys every channel has; null = the top-level setting."""

    transcription: TranscriptionSettings | None = Field(
        None, description="this channel's voice-note transcription; null = the top-level transcription"
    )
    speech: SpeechSettings | None = Field(
        None, description="this channel's spoken replies; null = the top-level speech"
    )


def voice_problems(raw: dict[str, Any]) -> list[str]:
    """Each ``provider`` a transcription or speech setting names must be an openai-type provider."""
    providers = raw.get("providers") if isinstance(raw.get("providers"), dict) else {}
    places: list[tuple[str, Any]] = [(key, raw.get(key)) for key in ("transcription", "speech")]
    channels = raw.get("channels") if isinstance(raw.get("channels"), list) else []
    for i, ch in enumerate(channels):
        if isinstance(ch, dict):
            places += [(f"channels[{i}].{key}", ch.get(key)) for key in ("transcription", "speech")]
    types = {str(n): (spec.get("type") if isinstance(spec, dict) else None) for n, spec in providers.items()}
    problems = []
    for path, value in places:
        name = value.get("provider") if isinstance(value, dict) else None
        if name and (why := audio_provider_problem(path, name, types)) is not None:
            problems.append(why)
    return problems


def audio_provider_problem(path: str, name: str, types: Mapping[str, str | None]) -> str | None:
    """Why the provider ``name`` (at ``path``, e.g. ``speech.provider``'s parent) cannot serve
    audio, given each configured provider's type; None when it can."""
    if name not in types:
        known = ", ".join(types) or "(none: add one under providers)"
        return f"{path}.provider: no provider named {name!r}; use one of {known}"
    if types[name] != "openai":
        return (
            f"{path}.provider: {name!r} is of type {types[name]!r}; audio needs an OpenAI-compatible "
            "provider (type: openai, base_url of a server with /audio endpoints)"
        )
    return None
