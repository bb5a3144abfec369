"""How a heard (or unheard) voice note reads in the model's transcript. No dependencies."""

from __future__ import annotations

from typing import Any

__all__ = ["voice_note_text"]


def voice_note_text(entry: dict[str, Any]) -> str | None:
    """The transcript block of an attachment entry, or None when it is no voice note."""
    path = entry.get("path")
    if "transcript" in entry:
        seconds = entry.get("audio_seconds")
        length = f", {seconds:g} s" if isinstance(seconds, int | float) else ""
        cut = entry.get("transcript_cut_at")
        cut_note = f"; only its first {cut:g} s were transcribed" if cut else ""
        heard = entry["transcript"] or "(no speech recognised)"
        return f"[voice note {path}{length}{cut_note}; transcript:]\n{heard}"
    if "transcript_note" in entry:
        return (
            f"[voice note {path}: {entry['transcript_note']}; the sender was told; the audio file is there]"
        )
    return None
