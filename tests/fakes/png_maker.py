"""Small real PNG files for tests, and crafted ones (a huge claimed canvas with a tiny body)."""

from __future__ import annotations

import struct
import zlib

__all__ = ["make_png", "png_claiming"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def make_png(width: int = 8, height: int = 6, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid RGB PNG of one colour."""
    row = b"\x00" + bytes(rgb) * width  # filter byte 0, then the pixels
    body = zlib.compress(row * height)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


def png_claiming(width: int, height: int) -> bytes:
    """A well-formed PNG container (valid CRCs) whose header claims ``width`` x ``height``
    pixels over a few bytes of data: what a decompression bomb looks like before decoding."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 4096, 9)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")
