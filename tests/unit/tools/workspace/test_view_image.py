"""view_image: the four kinds by their bytes, the size limits, and refusals the model can act on."""

from __future__ import annotations

import base64
import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from PIL import Image

from gateway.image_format import ImageFormatError, inspect
from gateway.runtime.model import ToolResult
from tools.base import ToolContext, ToolError
from tools.workspace import view_image as tool


def picture(kind: str, size: tuple[int, int] = (37, 21), **options: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(out, kind, **options)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A well-formed PNG that claims a canvas of ``width`` x ``height`` (its data is not valid)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"x") + chunk(b"IEND", b"")


async def view(ctx: ToolContext, path: str) -> ToolResult:
    return await tool.handle(ctx, {"file_path": path})


@pytest.mark.parametrize(
    ("kind", "options", "media_type"),
    [
        ("PNG", {}, "image/png"),
        ("JPEG", {}, "image/jpeg"),
        ("JPEG", {"progressive": True}, "image/jpeg"),
        ("GIF", {}, "image/gif"),
        ("WEBP", {}, "image/webp"),
        ("WEBP", {"lossless": True}, "image/webp"),
    ],
)
async def test_each_kind_is_shown_with_its_metadata(
    ctx: ToolContext, workspace: Path, kind: str, options: dict[str, object], media_type: str
) -> None:
    data = picture(kind, **options)
    (workspace / "pic.bin").write_bytes(data)  # the name says nothing: the bytes decide
    result = await view(ctx, "/workspace/pic.bin")
    assert result.value == {
        "path": "/workspace/pic.bin",
        "type": media_type,
        "size": len(data),
        "width": 37,
        "height": 21,
        **({"frames": 1} if kind == "GIF" else {}),
    }
    [image] = result.images
    assert image.media_type == media_type and base64.b64decode(image.data) == data


async def test_a_webp_with_alpha_and_an_animated_gif(ctx: ToolContext, workspace: Path) -> None:
    out = io.BytesIO()
    Image.new("RGBA", (33, 44), (1, 2, 3, 100)).save(out, "WEBP")
    (workspace / "alpha.webp").write_bytes(out.getvalue())
    frames = [Image.new("RGB", (10, 12), colour) for colour in ("red", "green", "blue")]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    (workspace / "anim.gif").write_bytes(out.getvalue())
    alpha, anim = await view(ctx, "alpha.webp"), await view(ctx, "anim.gif")
    assert (alpha.value["width"], alpha.value["height"]) == (33, 44)
    assert (anim.value["width"], anim.value["height"], anim.value["frames"]) == (10, 12, 3)


async def test_a_file_that_is_not_an_image_is_refused_whatever_its_name(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "notes.png").write_text("just text, not a picture\n")
    (workspace / "empty.png").write_bytes(b"")
    with pytest.raises(ToolError, match=r"'/workspace/notes.png' is not a PNG, JPEG, GIF or WebP image"):
        await view(ctx, "notes.png")
    with pytest.raises(ToolError, match=r"is empty; send the path of a PNG, JPEG, GIF or WebP file"):
        await view(ctx, "empty.png")


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "GIF", "WEBP"])
async def test_a_truncated_image_is_refused(ctx: ToolContext, workspace: Path, kind: str) -> None:
    (workspace / "cut").write_bytes(picture(kind)[:-6])
    with pytest.raises(
        ToolError, match=rf"is a truncated {kind.replace('WEBP', 'WebP')} file.*use bash to repair"
    ):
        await view(ctx, "cut")


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "GIF", "WEBP"])
async def test_a_polyglot_is_refused_with_where_the_image_ends(
    ctx: ToolContext, workspace: Path, kind: str
) -> None:
    image = picture(kind)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("payload.sh", "echo hidden")
    (workspace / "both.img").write_bytes(image + archive.getvalue())
    with pytest.raises(ToolError) as refused:
        await view(ctx, "both.img")
    assert f"followed by {len(archive.getvalue()):,} more bytes" in str(refused.value)
    assert f"the image itself is the first {len(image):,} bytes" in str(refused.value)


async def test_a_damaged_png_chunk_is_refused(ctx: ToolContext, workspace: Path) -> None:
    data = bytearray(picture("PNG"))
    data[44] ^= 0xFF  # in the data of IDAT, the chunk after IHDR
    (workspace / "bad.png").write_bytes(bytes(data))
    with pytest.raises(ToolError, match=r"is a damaged PNG \(the CRC of its 'IDAT' chunk"):
        await view(ctx, "bad.png")


async def test_a_huge_canvas_is_described_not_sent(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "wide.png").write_bytes(png_header_only(9000, 10))
    (workspace / "bomb.png").write_bytes(png_header_only(7000, 7000))
    wide, bomb = await view(ctx, "wide.png"), await view(ctx, "bomb.png")
    assert wide.images == () and bomb.images == ()
    assert wide.value["imageOmitted"] is True and "over 8,000 pixels on a side" in wide.value["reason"]
    assert (bomb.value["width"], bomb.value["height"]) == (7000, 7000)
    assert bomb.value["imageOmitted"] is True and "over 40,000,000 pixels" in bomb.value["reason"]


async def test_a_file_over_the_base64_limit_is_described_not_sent(ctx: ToolContext, workspace: Path) -> None:
    data = png_header_only(640, 480)
    data = data[:-12] + b"\x00" * (tool.MAX_INLINE_BYTES) + data[-12:]  # too big, headers intact
    (workspace / "big.png").write_bytes(data)
    result = await view(ctx, "big.png")
    assert result.images == ()
    assert result.value["imageOmitted"] is True
    assert (result.value["width"], result.value["height"], result.value["size"]) == (640, 480, len(data))
    assert "over the 2,097,152-byte base64 limit" in result.value["reason"]


async def test_the_largest_file_that_fits_is_sent(ctx: ToolContext, workspace: Path) -> None:
    data = picture("PNG")
    padded = (
        data[:33] + _chunk(b"tEXt", b"c\x00" + b"x" * (tool.MAX_INLINE_BYTES - len(data) - 14)) + data[33:]
    )
    assert len(padded) == tool.MAX_INLINE_BYTES
    (workspace / "fits.png").write_bytes(padded)
    result = await view(ctx, "fits.png")
    assert len(result.images[0].data) <= tool.MAX_BASE64_BYTES


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


async def test_paths_outside_the_roots_are_refused(ctx: ToolContext, workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.png").write_bytes(picture("PNG"))
    (workspace / "link.png").symlink_to(tmp_path / "secret.png")
    with pytest.raises(ToolError, match="outside the workspace"):
        await view(ctx, str(tmp_path / "secret.png"))
    with pytest.raises(ToolError, match="climbs above /workspace"):
        await view(ctx, "../../secret.png")
    with pytest.raises(ToolError, match="symbolic link"):
        await view(ctx, "link.png")
    with pytest.raises(ToolError, match="does not exist; list_directory or glob"):
        await view(ctx, "missing.png")


def test_headers_only_give_the_dimensions_of_every_kind() -> None:
    for kind in ("PNG", "JPEG", "GIF", "WEBP"):
        data = picture(kind, (1234, 567))
        info = inspect(data[:2048], complete=False)
        assert (info.kind, info.width, info.height) == (kind.lower(), 1234, 567)
    with pytest.raises(ImageFormatError, match="empty canvas"):
        inspect(png_header_only(0, 10), complete=True)
