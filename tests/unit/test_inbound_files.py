"""Inbound files move into their thread's workspace once the message is committed: a crash
before or during the move loses nothing and leaves no path to nowhere (the next start finishes
it), names within a message stay apart, and a link planted in the workspace leads nowhere."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import Attachment, InboundEvent, Sender, ThreadKey
from gateway import inbound_files
from gateway.config import Binding
from gateway.pipeline import Bindings, Pipeline
from gateway.store.db import Database, open_database
from gateway.workspaces import thread_folder
from tests.store_helpers import fetch_row, fetch_rows

KEY = ThreadKey("tg", "42")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def _pipeline(db: Database) -> Pipeline:
    return Pipeline(db, Bindings([Binding(channel="tg", persona="p")], ["p"]))


def _staged(tmp_path: Path, name: str, data: bytes) -> Attachment:
    path = tmp_path / "files" / "tg" / "42" / f"9_{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Attachment(name, str(path), "text/plain", len(data))


def _bytes(path: str) -> bytes | None:
    """The file's bytes, None when it is gone."""
    file = Path(path)
    return file.read_bytes() if file.exists() else None


def _event(*files: Attachment, event_id: str = "1") -> InboundEvent:
    return InboundEvent("tg", event_id, KEY, "dm", Sender("7", "Ada"), "see attached", attachments=files)


async def _entries(db: Database, message_id: int | None) -> list[dict[str, Any]]:
    row = await fetch_row(db, "SELECT attachments FROM messages WHERE id = ?", (message_id,))
    assert row is not None
    return json.loads(row["attachments"])


async def test_a_crash_before_the_move_is_finished_at_the_next_start(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attachment = _staged(tmp_path, "a.txt", b"alpha")

    async def crash(*args: object) -> None:
        raise KeyboardInterrupt  # the process dies right after the commit

    monkeypatch.setattr(Pipeline, "_place", crash)
    with pytest.raises(KeyboardInterrupt):
        await _pipeline(db).ingest(_event(attachment))
    (row,) = await fetch_rows(db, "SELECT id, thread_id FROM messages")
    [entry] = await _entries(db, row["id"])
    # Committed with its final path and where the file still is: nothing dangles, nothing is lost.
    assert entry["path"] == f"/workspace/inbox/{row['id']}/a.txt" and entry["staged"] == attachment.path
    assert _bytes(attachment.path) == b"alpha"

    monkeypatch.undo()
    assert await _pipeline(db).recover() == 1
    placed = (
        thread_folder(tmp_path / "workspaces", "p", row["thread_id"]) / "inbox" / str(row["id"]) / "a.txt"
    )
    assert placed.read_bytes() == b"alpha" and _bytes(attachment.path) is None
    assert await _entries(db, row["id"]) == [{k: v for k, v in entry.items() if k != "staged"}]
    assert await _pipeline(db).recover() == 0


async def test_a_crash_after_the_move_only_records_it(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attachment = _staged(tmp_path, "b.txt", b"bravo")

    async def move_then_crash(
        self: Pipeline, message_id: int, thread_id: int, persona: str, entries: Any
    ) -> None:
        inbound_files.place(thread_folder(tmp_path / "workspaces", persona, thread_id), entries)
        raise KeyboardInterrupt  # moved, but the message still says staged

    monkeypatch.setattr(Pipeline, "_place", move_then_crash)
    with pytest.raises(KeyboardInterrupt):
        await _pipeline(db).ingest(_event(attachment))
    monkeypatch.undo()
    (row,) = await fetch_rows(db, "SELECT id, thread_id FROM messages")
    assert "staged" in (await _entries(db, row["id"]))[0]

    assert await _pipeline(db).recover() == 1
    [entry] = await _entries(db, row["id"])
    assert entry["path"] == f"/workspace/inbox/{row['id']}/b.txt" and "staged" not in entry
    placed = (
        thread_folder(tmp_path / "workspaces", "p", row["thread_id"]) / "inbox" / str(row["id"]) / "b.txt"
    )
    assert placed.read_bytes() == b"bravo"


async def test_same_names_in_one_message_stay_apart(db: Database, tmp_path: Path) -> None:
    first = _staged(tmp_path, "report.csv", b"one")
    other = _staged(tmp_path, "x", b"two")
    second = Attachment("report.csv", other.path, "text/csv", 3)
    result = await _pipeline(db).ingest(_event(first, second))
    entries = await _entries(db, result.message_id)
    inbox = f"/workspace/inbox/{result.message_id}"
    assert [e["path"] for e in entries] == [f"{inbox}/report.csv", f"{inbox}/report-2.csv"]
    folder = (
        thread_folder(tmp_path / "workspaces", "p", result.thread_id or 0) / "inbox" / str(result.message_id)
    )
    assert sorted((p.name, p.read_bytes()) for p in folder.iterdir()) == [
        ("report-2.csv", b"two"),
        ("report.csv", b"one"),
    ]


async def test_a_link_planted_at_inbox_is_not_followed(db: Database, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pipeline = _pipeline(db)
    earlier = await pipeline.ingest(InboundEvent("tg", "0", KEY, "dm", Sender("7", "Ada"), "hello"))
    workspace = thread_folder(tmp_path / "workspaces", "p", earlier.thread_id or 0)
    workspace.mkdir(parents=True)
    os.symlink(outside, workspace / "inbox")  # what a sandboxed shell could leave behind
    attachment = _staged(tmp_path, "c.txt", b"charlie")

    result = await pipeline.ingest(_event(attachment))
    [entry] = await _entries(db, result.message_id)
    assert entry["path"] is None and "inbox in the workspace is not a folder" in entry["note"]
    assert list(outside.iterdir()) == []
    assert _bytes(attachment.path) == b"charlie"  # kept in staging, not lost


async def test_a_redelivered_event_leaves_no_download_behind(db: Database, tmp_path: Path) -> None:
    pipeline = _pipeline(db)
    first = await pipeline.ingest(_event(_staged(tmp_path, "c.txt", b"charlie")))
    again = _staged(tmp_path, "c.txt", b"charlie")  # the connector downloads it again, same name
    assert (await pipeline.ingest(_event(again))).status.value == "duplicate"
    assert _bytes(again.path) is None
    placed = (
        thread_folder(tmp_path / "workspaces", "p", first.thread_id)
        / "inbox"
        / str(first.message_id)
        / "c.txt"
    )
    assert placed.read_bytes() == b"charlie"


async def test_a_redelivery_keeps_the_download_the_first_delivery_still_needs(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def crash(*args: object) -> None:
        raise KeyboardInterrupt  # committed; the move waits for the next start

    monkeypatch.setattr(Pipeline, "_place", crash)
    with pytest.raises(KeyboardInterrupt):
        await _pipeline(db).ingest(_event(_staged(tmp_path, "d.txt", b"delta")))
    monkeypatch.undo()
    again = _staged(tmp_path, "d.txt", b"delta")
    assert (await _pipeline(db).ingest(_event(again))).status.value == "duplicate"
    assert _bytes(again.path) == b"delta"
    assert await _pipeline(db).recover() == 1
    (row,) = await fetch_rows(db, "SELECT id, thread_id FROM messages")
    placed = (
        thread_folder(tmp_path / "workspaces", "p", row["thread_id"]) / "inbox" / str(row["id"]) / "d.txt"
    )
    assert placed.read_bytes() == b"delta" and _bytes(again.path) is None
