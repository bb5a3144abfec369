"""The images of a transcript's user messages: which are shown, which become notes, and how a
crafted file (a decompression bomb, a huge file, a link out of the workspace, a FIFO) is bounded."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from gateway.runtime.context import build_transcript
from gateway.runtime.inbound_images import (
    MAX_IMAGE_BYTES,
    MAX_SHOWN_PER_MESSAGE,
    MAX_SHOWN_PER_TURN,
    transcript_images,
)
from gateway.runtime.model import ChatMessage, ImageBlock
from gateway.runtime.providers.anthropic_provider import to_anthropic_messages
from gateway.runtime.providers.openai_provider import to_openai_messages
from gateway.store.messages import MessageRow
from tests.fakes.png_maker import make_png, png_claiming


def _row(workspace: Path, message_id: int, files: dict[str, bytes], text: str = "look") -> MessageRow:
    entries = []
    for name, data in files.items():
        host = workspace / "inbox" / str(message_id) / name
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)
        entries.append(
            {"name": name, "path": f"/workspace/inbox/{message_id}/{name}", "mime_type": "image/png"}
        )
    return MessageRow(message_id, "user", "Ann", text, json.dumps(entries), None)


def test_a_valid_image_is_shown_with_a_note_naming_its_path(tmp_path: Path) -> None:
    png = make_png(3, 2)
    row = _row(tmp_path, 7, {"a.png": png})
    (shown,) = transcript_images([row], tmp_path, vision=True).values()
    assert shown.blocks == (ImageBlock("image/png", base64.b64encode(png).decode()),)
    assert shown.notes == ("[image at /workspace/inbox/7/a.png (3x2 PNG), shown below]",)


def test_only_the_newest_images_of_the_turn_and_of_a_message_are_shown(tmp_path: Path) -> None:
    many = {f"p{i}.png": make_png(2, 2, (i, 0, 0)) for i in range(MAX_SHOWN_PER_MESSAGE + 2)}
    rows = [_row(tmp_path, 100 - n, many) for n in range(3)]  # newest first
    shown = transcript_images(rows, tmp_path, vision=True)
    counts = [len(shown[r.id].blocks) for r in rows]
    assert counts == [MAX_SHOWN_PER_MESSAGE, MAX_SHOWN_PER_TURN - MAX_SHOWN_PER_MESSAGE, 0]
    assert sum("at most 5 images of one message are" in n for n in shown[100].notes) == 2
    assert all("not shown again, only the newest 10 images" in n for n in shown[98].notes)


def test_a_decompression_bomb_is_a_note_and_never_decoded(tmp_path: Path) -> None:
    bomb = png_claiming(100_000, 100_000)
    assert len(bomb) < 200
    row = _row(tmp_path, 1, {"bomb.png": bomb})
    (shown,) = transcript_images([row], tmp_path, vision=True).values()
    assert shown.blocks == ()
    assert shown.notes == (
        "[image at /workspace/inbox/1/bomb.png: not shown, it claims 100,000x100,000 pixels (over 8,000 on a "
        "side or 40,000,000 in all)]",
    )


def test_a_huge_file_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    big = make_png(4, 4) + b"\0" * (MAX_IMAGE_BYTES + 10)
    row = _row(tmp_path, 2, {"big.png": big})
    (shown,) = transcript_images([row], tmp_path, vision=True).values()
    assert shown.blocks == ()
    assert "the file is over 3,750,000 bytes" in shown.notes[0]


def test_damaged_and_disguised_files_are_notes(tmp_path: Path) -> None:
    png = make_png(4, 4)
    row = _row(tmp_path, 3, {"cut.png": png[:-5], "zip.png": png + b"PK\x03\x04", "text.png": b"hello"})
    (shown,) = transcript_images([row], tmp_path, vision=True).values()
    assert shown.blocks == ()
    cut, polyglot, text = shown.notes
    assert "is a truncated PNG file" in cut
    assert "followed by 4 more bytes of something else" in polyglot
    assert "not a PNG, JPEG, GIF or WebP image" in text


def test_a_link_out_of_the_workspace_and_a_fifo_are_not_read(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "other"
    outside.mkdir()
    (outside / "secret.png").write_bytes(make_png(2, 2))
    row = _row(workspace, 4, {"x.png": b""})
    folder = workspace / "inbox" / "4"
    (folder / "x.png").unlink()
    (folder / "x.png").symlink_to(outside / "secret.png")
    fifo_row = _row(workspace, 5, {"f.png": b""})
    (workspace / "inbox" / "5" / "f.png").unlink()
    os.mkfifo(workspace / "inbox" / "5" / "f.png")
    linked_folder = _row(workspace, 6, {"y.png": b""})
    (workspace / "inbox" / "6" / "y.png").unlink()
    (workspace / "inbox" / "6").rmdir()
    (workspace / "inbox" / "6").symlink_to(outside)
    shown = transcript_images([row, fifo_row, linked_folder], workspace, vision=True)
    assert all(s.blocks == () for s in shown.values())
    assert all("could not be read" in s.notes[0] for s in shown.values())


def test_without_vision_each_image_is_named_and_nothing_is_read(tmp_path: Path) -> None:
    row = _row(tmp_path, 8, {"a.png": make_png(2, 2)})
    (shown,) = transcript_images([row], tmp_path, vision=False).values()
    assert shown.blocks == ()
    assert shown.notes[0].startswith(
        "[the user sent an image at /workspace/inbox/8/a.png; this model cannot see"
    )


def test_the_transcript_keeps_images_through_merged_messages(tmp_path: Path) -> None:
    rows = [
        _row(tmp_path, 11, {"b.png": make_png(2, 2)}, "second"),
        _row(tmp_path, 10, {"a.png": make_png(3, 3)}, "first"),
    ]
    images = transcript_images(rows, tmp_path, vision=True)
    (message,) = build_transcript(rows, budget_tokens=10_000, images=images)
    assert message.role == "user" and len(message.images) == 2
    assert message.content.index("first") < message.content.index("a.png") < message.content.index("second")


def test_providers_render_a_user_message_s_images_or_a_note() -> None:
    image = ImageBlock("image/png", base64.b64encode(make_png(2, 2)).decode())
    messages = [ChatMessage("user", "see", images=(image,))]
    (shown,) = to_anthropic_messages(messages)
    assert [b["type"] for b in shown["content"]] == ["text", "image"]
    (hidden,) = to_anthropic_messages(messages, images=False)
    assert [b["type"] for b in hidden["content"]] == ["text"] and "not shown" in hidden["content"][0]["text"]
    (_, openai) = to_openai_messages("sys", messages)
    assert [p["type"] for p in openai["content"]] == ["text", "image_url"]
    (_, plain) = to_openai_messages("sys", messages, images=False)
    assert isinstance(plain["content"], str) and "not shown" in plain["content"]
