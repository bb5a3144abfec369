"""What an image file is, read from its bytes alone: PNG, JPEG, GIF or WebP, and its size.

Nothing is decoded. The format comes from the magic bytes (never the file name), the
dimensions from the headers, and :func:`inspect` with ``complete=True`` walks the whole
container (PNG chunks with their CRCs, JPEG segments up to EOI, GIF blocks up to the
trailer, the RIFF chunks of a WebP) so that a truncated file, or one with another file
appended after the image's end (a polyglot: a ZIP or HTML behind a valid image), is refused
with where the image ends. Every loop advances through the data, so a crafted file costs
time linear in its size.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from gateway.errors import RefusedError

__all__ = ["KINDS", "ImageFormatError", "ImageInfo", "inspect", "sniff"]

KINDS = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
_PNG = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (C4 DHT, C8 JPG and CC DAC are not frames).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


class ImageFormatError(RefusedError):
    """The bytes are not a well-formed image of a supported kind; the message says how."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """An image's kind and size.

    Attributes:
        kind (:obj:`str`): ``png``, ``jpeg``, ``gif`` or ``webp``.
        width (:obj:`int`): Pixels.
        height (:obj:`int`): Pixels.
        frames (:obj:`int` | :obj:`None`): A GIF's frame count (known when the whole file was walked).
    """

    kind: str
    width: int
    height: int
    frames: int | None = None

    @property
    def media_type(self) -> str:
        return KINDS[self.kind]


def sniff(head: bytes) -> str | None:
    """The kind the magic bytes at the start of a file name, or ``None``."""
    if head.startswith(_PNG):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def inspect(data: bytes, *, complete: bool) -> ImageInfo:
    """The kind and size of the image in ``data``.

    Args:
        data: The whole file (``complete``) or its first part (headers only, not validated
            past the dimensions).

    Raises:
        :class:`ImageFormatError`: Not a supported image, or (``complete``) truncated, damaged or
            followed by other data.
    """
    kind = sniff(data[:16])
    if kind is None:
        raise ImageFormatError("is not a PNG, JPEG, GIF or WebP image (its first bytes match none of them)")
    info = _PARSERS[kind](data, complete)
    if info.width <= 0 or info.height <= 0:
        raise ImageFormatError(f"is a {kind.upper()} with an empty canvas ({info.width}x{info.height})")
    return info


def _truncated(kind: str) -> ImageFormatError:
    return ImageFormatError(f"is a truncated {kind} file (it ends before the image does)")


def _trailing(kind: str, end: int, total: int) -> ImageFormatError:
    return ImageFormatError(
        f"is a {kind} image followed by {total - end:,} more bytes of something else (a file appended to "
        f"it); the image itself is the first {end:,} bytes"
    )


def _png(data: bytes, complete: bool) -> ImageInfo:
    if len(data) < 33 or data[12:16] != b"IHDR" or struct.unpack(">I", data[8:12])[0] != 13:
        raise _truncated("PNG") if len(data) < 33 else ImageFormatError("is a PNG without its IHDR header")
    width, height = struct.unpack(">II", data[16:24])
    if not complete:
        return ImageInfo("png", width, height)
    pos = 8
    while True:
        if pos + 12 > len(data):
            raise _truncated("PNG")
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        end = pos + 12 + length
        if length > 0x7FFFFFFF or end > len(data):
            raise _truncated("PNG")
        kind_and_data = data[pos + 4 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(kind_and_data) != crc:
            chunk = kind_and_data[:4].decode("latin-1")
            raise ImageFormatError(
                f"is a damaged PNG (the CRC of its {chunk!r} chunk at byte {pos:,} is wrong)"
            )
        if kind_and_data[:4] == b"IEND":
            if end != len(data):
                raise _trailing("PNG", end, len(data))
            return ImageInfo("png", width, height)
        pos = end


def _jpeg(data: bytes, complete: bool) -> ImageInfo:
    size: tuple[int, int] | None = None
    pos = 2
    scanning = False  # inside entropy-coded data after SOS
    while pos < len(data):
        if data[pos] != 0xFF:
            if not scanning:
                raise ImageFormatError(f"is a damaged JPEG (no marker at byte {pos:,})")
            nxt = data.find(b"\xff", pos)
            pos = len(data) if nxt < 0 else nxt
            continue
        if pos + 1 >= len(data):
            break
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if scanning and (marker == 0x00 or 0xD0 <= marker <= 0xD7):  # stuffed byte, restart marker
            pos += 2
            continue
        if marker == 0xD9:  # EOI
            end = pos + 2
            if size is None:
                raise ImageFormatError("is a JPEG without a frame header (no dimensions)")
            if complete and end != len(data):
                raise _trailing("JPEG", end, len(data))
            return ImageInfo("jpeg", size[1], size[0])
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        if pos + 4 > len(data):
            break
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if length < 2:
            raise ImageFormatError(f"is a damaged JPEG (a segment at byte {pos:,} has length {length})")
        if marker in _SOF and size is None:
            if pos + 9 > len(data):
                break
            size = struct.unpack(">HH", data[pos + 5 : pos + 9])
            if not complete:
                return ImageInfo("jpeg", size[1], size[0])
        scanning = marker == 0xDA
        pos += 2 + length
    if size is not None and not complete:
        return ImageInfo("jpeg", size[1], size[0])
    if size is None and not complete:
        raise ImageFormatError("is a JPEG whose frame header is not in its first part")
    raise _truncated("JPEG")


def _gif(data: bytes, complete: bool) -> ImageInfo:
    if len(data) < 13:
        raise _truncated("GIF")
    width, height, flags = struct.unpack("<HHB", data[6:11])
    if not complete:
        return ImageInfo("gif", width, height)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    frames = 0
    while pos < len(data):
        block = data[pos]
        if block == 0x3B:  # trailer
            end = pos + 1
            if frames == 0:
                raise ImageFormatError("is a GIF without any image in it")
            if end != len(data):
                raise _trailing("GIF", end, len(data))
            return ImageInfo("gif", width, height, frames)
        if block == 0x21:  # extension: label, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:  # image descriptor, local colour table, LZW code size, sub-blocks
            if pos + 10 > len(data):
                break
            local = data[pos + 9]
            pos += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)
            pos = _skip_sub_blocks(data, pos + 1)
            frames += 1
        else:
            raise ImageFormatError(f"is a damaged GIF (an unknown block 0x{block:02x} at byte {pos:,})")
    raise _truncated("GIF")


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    """The position after a chain of GIF sub-blocks (each a length byte and data, ending with 0)."""
    while pos < len(data):
        length = data[pos]
        pos += 1 + length
        if length == 0:
            return pos
    raise _truncated("GIF")


def _webp(data: bytes, complete: bool) -> ImageInfo:
    if len(data) < 30:
        raise _truncated("WebP")
    (riff_size,) = struct.unpack("<I", data[4:8])
    end = 8 + riff_size
    if complete and end > len(data):
        raise _truncated("WebP")
    if complete and end < len(data):
        raise _trailing("WebP", end, len(data))
    chunk, payload = data[12:16], data[20:30]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(payload[4:7], "little")
        height = 1 + int.from_bytes(payload[7:10], "little")
    elif chunk == b"VP8L":
        if payload[0] != 0x2F:
            raise ImageFormatError("is a damaged WebP (a lossless stream without its signature)")
        bits = int.from_bytes(payload[1:5], "little")
        width, height = 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    elif chunk == b"VP8 ":
        if payload[3:6] != b"\x9d\x01\x2a":
            raise ImageFormatError("is a damaged WebP (a lossy frame without its start code)")
        width, height = (v & 0x3FFF for v in struct.unpack("<HH", payload[6:10]))
    else:
        raise ImageFormatError(f"is a WebP whose first chunk {chunk!r} is not VP8, VP8L or VP8X")
    if complete:
        _walk_riff(data, end)
    return ImageInfo("webp", width, height)


def _walk_riff(data: bytes, end: int) -> None:
    pos = 12
    while pos < end:
        if pos + 8 > end:
            raise _truncated("WebP")
        (size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        pos += 8 + size + (size & 1)
    if pos > end + 1:  # the last chunk's padding byte may be missing
        raise _truncated("WebP")


_PARSERS = {"png": _png, "jpeg": _jpeg, "gif": _gif, "webp": _webp}
