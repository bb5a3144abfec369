"""The audio clients of the configured providers, made once per provider and closed at stop;
and which transcription and speech settings apply in a channel."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from gateway.config import Settings
from gateway.lazy_import import import_off_loop
from gateway.voice_settings import SpeechSettings, TranscriptionSettings

if TYPE_CHECKING:
    from gateway.voice.audio_api import AudioClient

__all__ = ["AudioClients", "speech_for", "transcription_for"]


def transcription_for(settings: Settings, channel: str) -> TranscriptionSettings:
    """The channel's own ``transcription``, else the top-level one."""
    ch = settings.channel(channel)
    return (ch.transcription if ch is not None else None) or settings.transcription


def speech_for(settings: Settings, channel: str, persona: SpeechSettings | None = None) -> SpeechSettings:
    """The persona's own ``speech`` (its voice, wherever it talks), else the channel's, else the
    top-level one."""
    if persona is not None:
        return persona
    ch = settings.channel(channel)
    return (ch.speech if ch is not None else None) or settings.speech


class AudioClients:
    def __init__(self, settings: Settings):
        self._settings = settings
        self._clients: dict[str, AudioClient] = {}

    async def get(self, provider: str) -> AudioClient:
        """The client of ``provider`` (config validation made sure it is an openai-type one).
        The SDK is imported off the loop on first use: most daemons never hear a voice note."""
        client = self._clients.get(provider)
        if client is None:
            module = await import_off_loop("gateway.voice.audio_api")
            client = self._clients.get(provider)  # another call may have made it meanwhile
            if client is None:
                client = self._clients[provider] = module.AudioClient(
                    provider, self._settings.providers[provider]
                )
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.close()
        self._clients.clear()
