"""Spoken replies: the reply's plain text through ``/audio/speech``, as an OGG/Opus voice message.

The audio is made before the reply's commit and spooled like any attached file, so its outbox
row is committed in the same transaction as the reply's text rows: it is sent once, after the
text, through the outbox's file path (Telegram ``sendVoice``, a Discord attachment, a Slack
file upload), and a crash before the commit retries the turn with neither. The text is not held
back for long: speech has its own timeout, and a failure (or a missing ffmpeg) leaves the reply
text-only, logged.

Length: a reply longer than ``speech.max_chars`` is spoken up to the last sentence end within
the cap, followed by a short spoken pointer to the written reply.
"""

from __future__ import annotations

import logging
import os
import re

from gateway.config import Settings
from gateway.outbox_spool import FileSource, FileSpool
from gateway.runtime.model import ProviderError
from gateway.store.outbox import OutboxFile
from gateway.voice.clients import AudioClients, speech_for
from gateway.voice.ffmpeg import AudioToolError, to_ogg_opus
from gateway.voice.ogg import is_ogg_opus
from gateway.voice_settings import SpeechSettings

__all__ = ["REST_IS_WRITTEN", "VOICE_NAME", "Speaking", "spoken_text"]

log = logging.getLogger("talon.voice")

VOICE_NAME = "reply.ogg"
REST_IS_WRITTEN = "The rest is in the written reply."
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


def spoken_text(plain: str, max_chars: int) -> str:
    """What is spoken of a reply whose plain text is ``plain``: all of it within ``max_chars``,
    else up to the last sentence end within the cap (a word boundary if there is none) and
    :data:`REST_IS_WRITTEN`."""
    plain = " ".join(plain.split())
    if len(plain) <= max_chars:
        return plain
    head = plain[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    cut = ends[-1] if ends and ends[-1] > max_chars // 3 else (head.rfind(" ") if " " in head else max_chars)
    return f"{head[:cut].rstrip()} … {REST_IS_WRITTEN}"


class Speaking:
    def __init__(self, *, settings: Settings, clients: AudioClients, spool: FileSpool):
        self.settings = settings
        self.clients = clients
        self.spool = spool

    def wanted(self, channel: str, voiced: bool, persona: SpeechSettings | None = None) -> bool:
        """Whether a reply in ``channel`` is also spoken (``voiced``: its batch had a voice note;
        ``persona``: the answering persona's own ``speech``, which wins over the channel's)."""
        speech = speech_for(self.settings, channel, persona)
        return bool(speech.provider) and (speech.speak == "all" or voiced)

    async def voice_message(
        self, channel: str, plain: str, limit: int, persona: SpeechSettings | None = None
    ) -> OutboxFile | None:
        """The spooled voice message of a reply whose plain text is ``plain`` (the caller commits
        or discards it); None when it could not be made, which is logged."""
        speech = speech_for(self.settings, channel, persona)
        text = spoken_text(plain, speech.max_chars)
        if not speech.provider or not text:
            return None
        try:
            client = await self.clients.get(speech.provider)
            audio = await client.speak(text, model=speech.model, voice=speech.voice, timeout=speech.timeout)
            if not is_ogg_opus(audio):
                audio = await to_ogg_opus(audio, limit=limit)
        except (ProviderError, AudioToolError) as exc:
            log.warning("the reply is sent as text only; it could not be spoken: %s", exc)
            return None
        if len(audio) > limit:
            log.warning(
                "the spoken reply (%d bytes) is over the channel's upload limit; text only", len(audio)
            )
            return None
        fd = os.memfd_create("talon-spoken-reply", os.MFD_CLOEXEC)
        try:
            view = memoryview(audio)
            while view:
                view = view[os.write(fd, view) :]
            return await self.spool.take(FileSource(fd, len(audio), VOICE_NAME, "the spoken reply"), limit)
        finally:
            os.close(fd)
