"""Real voice notes for tests: espeak-ng speaks a sentence, ffmpeg encodes it as OGG/Opus (what
Telegram records), cached per test session.

The sentence is also written into the file's OGG comments (``TALON_SPOKEN=...``), which the
fake transcription endpoint (:mod:`tests.fakes.audio_api`) reads back as what it "heard": no
speech model runs here, and the fake works across processes.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["SPOKEN_TAG", "have_voice_tools", "voice_note", "wav_of"]

SPOKEN_TAG = "TALON_SPOKEN"


def have_voice_tools() -> bool:
    return all(shutil.which(tool) for tool in ("espeak-ng", "ffmpeg", "ffprobe"))


@functools.cache
def wav_of(text: str) -> bytes:
    """``text`` spoken by espeak-ng, as WAV bytes."""
    return subprocess.run(["espeak-ng", "--stdout", text], check=True, capture_output=True, timeout=30).stdout


@functools.cache
def voice_note(text: str, *, container: str = "ogg") -> bytes:
    """``text`` as a voice note: OGG/Opus by default, ``container="mp3"`` or ``"aiff"`` for other
    audio files (AIFF is one the transcription endpoints do not take)."""
    codec = {
        "ogg": ["-c:a", "libopus", "-b:a", "24k"],
        "mp3": ["-c:a", "libmp3lame"],
        "aiff": ["-write_id3v2", "1"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"note.{container}"
        args = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-ac", "1", *codec[container]]
        args += ["-metadata", f"{SPOKEN_TAG}={text}", str(out)]
        subprocess.run(args, input=wav_of(text), check=True, capture_output=True, timeout=30)
        return out.read_bytes()
