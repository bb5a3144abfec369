"""Images users sent, shown to the model with the messages they came with.

A turn's transcript is read newest first; the image attachments of its user messages (a
Telegram photo, a Slack image file, a Discord attachment, already in the thread's workspace
at ``/workspace/inbox/<message id>/<name>``) become :class:`ImageBlock` s of those messages
when the persona's model takes images (``providers.<name>.images`` and ``text_only_models``
in talon.yaml decide, as they do for ``view_image``). Otherwise each image is named in the
message's text with a note, so the model knows a picture is there and where it is.

Bounds (the model's tokens and the gateway's memory): only the newest
:data:`MAX_SHOWN_PER_TURN` images of the transcript are shown, at most
:data:`MAX_SHOWN_PER_MESSAGE` of one message, and no more than :data:`MAX_TURN_BYTES` of image
data in all; earlier ones are named with a note that ``view_image`` shows them. A file is read
only up to :data:`MAX_IMAGE_BYTES` (a larger one is never loaded) and nothing is decoded: the
kind and dimensions come from the headers (:mod:`gateway.image_format`), the whole container is
walked, and a file claiming more than :data:`MAX_SIDE` pixels on a side or :data:`MAX_PIXELS`
in all (a decompression bomb: a small PNG of a huge canvas) stays a file with a note. Nothing
is downscaled: an image over the limits is left for the persona's tools.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gateway.image_format import KINDS, ImageFormatError, inspect, sniff
from gateway.runtime.model import ImageBlock
from gateway.store.messages import MessageRow
from gateway.workspaces import WORKSPACE

__all__ = [
    "IMAGE_TOKENS",
    "MAX_IMAGE_BYTES",
    "MAX_PIXELS",
    "MAX_SHOWN_PER_MESSAGE",
    "MAX_SHOWN_PER_TURN",
    "MAX_SIDE",
    "MAX_TURN_BYTES",
    "RowImages",
    "transcript_images",
]

MAX_SHOWN_PER_TURN = 10  # a Telegram album holds up to 10 photos
MAX_SHOWN_PER_MESSAGE = 5
MAX_IMAGE_BYTES = 3_750_000  # 5 MB in base64, the most the Messages API takes per image
MAX_TURN_BYTES = 15_000_000  # 20 MB of base64 in one request, under the APIs' request limits
MAX_SIDE = 8000
MAX_PIXELS = 40_000_000
IMAGE_TOKENS = 1600  # about what a provider charges for one image scaled to its limit
_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "webp"})
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO must not block


@dataclass(frozen=True, slots=True)
class RowImages:
    """What one message's images add to it: the images shown and a line per image for its text."""

    blocks: tuple[ImageBlock, ...]
    notes: tuple[str, ...]


@dataclass(slots=True)
class _Budget:
    shown: int = 0
    data_bytes: int = 0


def transcript_images(rows: Sequence[MessageRow], workspace: Path, *, vision: bool) -> dict[int, RowImages]:
    """For each of ``rows`` (newest first) with image attachments, its :class:`RowImages`, by
    message id (blocking: reads files). ``workspace`` is the thread's ``/workspace`` on the host;
    ``vision``: whether the model takes images."""
    budget = _Budget()
    out: dict[int, RowImages] = {}
    for row in rows:
        if row.role != "user" or not row.attachments:
            continue
        paths = _image_paths(row.attachments)
        if not paths:
            continue
        blocks: list[ImageBlock] = []
        notes: list[str] = []
        for path in paths:
            if not vision:
                notes.append(
                    f"[the user sent an image at {path}; this model cannot see images "
                    "(providers.<name>.images or text_only_models in talon.yaml), so it is only a file]"
                )
                continue
            block, note = _one(workspace, path, budget, len(blocks))
            if block is not None:
                blocks.append(block)
            notes.append(note)
        out[row.id] = RowImages(tuple(blocks), tuple(notes))
    return out


def _image_paths(attachments: str) -> list[str]:
    try:
        files = json.loads(attachments)
    except ValueError:
        return []
    paths = []
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict) or entry.get("staged"):
            continue
        path = entry.get("path")
        if isinstance(path, str) and path.startswith(f"{WORKSPACE}/") and _looks_like_image(entry):
            paths.append(path)
    return paths


def _looks_like_image(entry: dict[str, Any]) -> bool:
    mime = str(entry.get("mime_type") or "")
    if mime.startswith("image/"):
        return True
    name = str(entry.get("name") or entry.get("path") or "")
    return name.rsplit(".", 1)[-1].lower() in _EXTENSIONS


def _one(workspace: Path, path: str, budget: _Budget, in_message: int) -> tuple[ImageBlock | None, str]:
    """The image at ``path`` and its note, or ``None`` and why it is not shown."""
    if budget.shown >= MAX_SHOWN_PER_TURN:
        return None, (
            f"[image at {path}: not shown again, only the newest {MAX_SHOWN_PER_TURN} images of the "
            "conversation are; view_image shows it]"
        )
    if in_message >= MAX_SHOWN_PER_MESSAGE:
        return None, (
            f"[image at {path}: not shown, at most {MAX_SHOWN_PER_MESSAGE} images of one message are; "
            "view_image shows it]"
        )
    try:
        data = _read(workspace, path)
    except OSError as exc:
        return None, f"[image at {path}: could not be read ({exc.strerror or exc})]"
    if data is None:
        return None, (
            f"[image at {path}: not shown, the file is over {MAX_IMAGE_BYTES:,} bytes; "
            "it is in the workspace for the persona's tools]"
        )
    if sniff(data[:16]) is None:
        return None, f"[file at {path}: not a PNG, JPEG, GIF or WebP image, so not shown]"
    try:
        info = inspect(data, complete=True)
    except ImageFormatError as exc:
        return None, f"[image at {path}: not shown, the file {exc}]"
    if max(info.width, info.height) > MAX_SIDE or info.width * info.height > MAX_PIXELS:
        return None, (
            f"[image at {path}: not shown, it claims {info.width:,}x{info.height:,} pixels (over "
            f"{MAX_SIDE:,} on a side or {MAX_PIXELS:,} in all)]"
        )
    if budget.data_bytes + len(data) > MAX_TURN_BYTES:
        return None, (
            f"[image at {path}: not shown, the newer images already fill this turn's "
            f"{MAX_TURN_BYTES:,} bytes of images; view_image shows it]"
        )
    budget.shown += 1
    budget.data_bytes += len(data)
    block = ImageBlock(KINDS[info.kind], base64.b64encode(data).decode("ascii"))
    return block, f"[image at {path} ({info.width}x{info.height} {info.kind.upper()}), shown below]"


def _read(workspace: Path, path: str) -> bytes | None:
    """The file's bytes, or ``None`` when it is over :data:`MAX_IMAGE_BYTES` (then only that
    much was read). The file must be a regular file inside ``workspace``: a link the sandboxed
    shell put there is not followed out of it."""
    relative = PurePosixPath(path).relative_to(WORKSPACE)
    if ".." in relative.parts:
        raise FileNotFoundError(2, "outside the workspace")
    host = workspace / relative
    real = Path(os.path.realpath(host.parent))
    if not real.is_relative_to(os.path.realpath(workspace)):
        raise FileNotFoundError(2, "outside the workspace")
    fd = os.open(real / host.name, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(2, "not a regular file")
        chunks: list[bytes] = []
        left = MAX_IMAGE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return None if len(data) > MAX_IMAGE_BYTES else data
