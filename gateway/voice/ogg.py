"""The length of an OGG (Opus or Vorbis) file read from its first and last pages, without a
child process: a voice note's duration check costs microseconds instead of an ffprobe run.

The last page's granule position counts samples (48 kHz for Opus, less the pre-skip; the
stream's own rate for Vorbis). Anything else, or a file this cannot read, gives None and the
caller asks ffprobe.
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["is_ogg_opus", "ogg_duration"]

_TAIL = 64 * 1024
_HEAD = 512


def is_ogg_opus(data: bytes) -> bool:
    """True for bytes that open an OGG stream of Opus audio (what Telegram plays as voice)."""
    return data.startswith(b"OggS") and b"OpusHead" in data[:_HEAD]


def ogg_duration(path: Path) -> float | None:
    """Seconds of audio in the OGG file ``path``, or None when it is not OGG Opus/Vorbis."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
            size = f.seek(0, 2)
            f.seek(max(0, size - _TAIL))
            tail = f.read(_TAIL)
    except OSError:
        return None
    if not head.startswith(b"OggS"):
        return None
    rate, skip = _rate_and_skip(head)
    last = tail.rfind(b"OggS")
    if rate is None or last < 0 or len(tail) < last + 14:
        return None
    (granule,) = struct.unpack_from("<q", tail, last + 6)
    if granule < 0:
        return None
    return max(0.0, (granule - skip) / rate)


def _rate_and_skip(head: bytes) -> tuple[int | None, int]:
    opus = head.find(b"OpusHead")
    if opus >= 0 and len(head) >= opus + 12:
        (pre_skip,) = struct.unpack_from("<H", head, opus + 10)
        return 48000, pre_skip
    vorbis = head.find(b"\x01vorbis")
    if vorbis >= 0 and len(head) >= vorbis + 16:
        (rate,) = struct.unpack_from("<I", head, vorbis + 12)
        return (rate or None), 0
    return None, 0
