"""File rows of the outbox and their spool: what is sent is the copy made when the post was
committed, the copy goes once the row's delivery ends, a crash mid-upload leaves the row
``unknown`` (never uploaded twice) unless the connector is idempotent, and a file over the
channel's limit is refused before anything is copied or queued."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.base import ConnectorHealth, OutboundChunk, OutboundFile, RenderedChunk, SendResult, ThreadKey
from gateway.config import OutboxSettings
from gateway.outbox import Outbox, ThreadAddress, enqueue_files
from gateway.outbox_spool import FileSource, FileSpool, FileTooLargeError
from gateway.store.db import Database, open_database
from gateway.store.outbox import mark_sending, next_pending
from tests.store_helpers import fetch_row


class FileConnector:
    """Records what each upload read from its spooled copy."""

    name = "files"

    def __init__(self, *, idempotent: bool = False, limit: int = 1000) -> None:
        self.health = ConnectorHealth("connected")
        self.idempotent_send = idempotent
        self.max_file_bytes = limit
        self.uploaded: list[tuple[str, bytes]] = []

    def render(self, markdown: str) -> list[RenderedChunk]:
        return [RenderedChunk(markdown, markdown, "plain")]

    async def send(self, item: OutboundChunk) -> SendResult:
        return SendResult.sent("text")

    async def send_file(self, item: OutboundFile) -> SendResult:
        self.uploaded.append((item.name, await asyncio.to_thread(Path(item.path).read_bytes)))
        return SendResult.sent(str(item.delivery_id))

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        return None


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def _source(path: Path) -> tuple[FileSource, int]:
    fd = os.open(path, os.O_RDONLY)
    return FileSource(fd=fd, size=os.fstat(fd).st_size, name=path.name, shown=f"/workspace/{path.name}"), fd


async def _queue_file(db: Database, spool: FileSpool, path: Path) -> int:
    source, fd = _source(path)
    try:
        file = await spool.take(source, 1000)
    finally:
        os.close(fd)

    def insert(conn):  # type: ignore[no-untyped-def]
        now = time.time()
        (thread_id,) = conn.execute(
            "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('files', '1', ?, ?) RETURNING id",
            (now, now),
        ).fetchone()
        enqueue_files(conn, ThreadAddress(thread_id, ThreadKey("files", "1")), [file])
        return thread_id

    return await db.run_transaction(insert)


def _spooled(spool: FileSpool) -> list[Path]:
    return sorted(spool.root.iterdir()) if spool.root.exists() else []


async def test_the_copy_is_what_is_sent_and_it_is_removed_after_delivery(
    db: Database, tmp_path: Path
) -> None:
    original = tmp_path / "report.csv"
    original.write_bytes(b"a,b\n1,2\n")
    spool = FileSpool.beside(db.path)
    thread_id = await _queue_file(db, spool, original)
    (copy,) = _spooled(spool)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    original.write_bytes(b"edited after the post")  # in place: a hard link would follow this
    original.unlink()
    connector = FileConnector()
    outbox = Outbox(db, {"files": connector}, OutboxSettings())
    outbox.notify(thread_id)
    assert await outbox.flush(5)
    await outbox.close()
    assert connector.uploaded == [("report.csv", b"a,b\n1,2\n")]
    row = await fetch_row(db, "SELECT status, format, text, file_size, file_sha256 FROM outbox")
    assert (row["status"], row["format"], row["text"]) == ("sent", "file", "[file report.csv, 8 bytes]")
    assert row["file_size"] == 8 and len(row["file_sha256"]) == 64
    assert _spooled(spool) == []


@pytest.mark.parametrize(("idempotent", "status", "uploads"), [(False, "unknown", 0), (True, "sent", 1)])
async def test_a_file_on_the_wire_at_a_crash_is_unknown_unless_resending_is_safe(
    db: Database, tmp_path: Path, idempotent: bool, status: str, uploads: int
) -> None:
    original = tmp_path / "chart.png"
    original.write_bytes(b"\x89PNG fake")
    spool = FileSpool.beside(db.path)
    thread_id = await _queue_file(db, spool, original)
    row = await db.read(next_pending, thread_id)
    assert row is not None
    await db.run_transaction(mark_sending, row.id)  # the process died during the upload
    connector = FileConnector(idempotent=idempotent)
    outbox = Outbox(db, {"files": connector}, OutboxSettings())
    await outbox.recover()
    assert await outbox.flush(5)
    await outbox.close()
    assert (await fetch_row(db, "SELECT status FROM outbox"))["status"] == status
    assert len(connector.uploaded) == uploads
    assert _spooled(spool) == []


async def test_recovery_sweeps_copies_no_open_row_names(db: Database, tmp_path: Path) -> None:
    spool = FileSpool.beside(db.path)
    spool.root.mkdir(parents=True)
    (spool.root / "left-by-a-crash-before-commit").write_bytes(b"x")
    kept = tmp_path / "kept.txt"
    kept.write_text("kept")
    await _queue_file(db, spool, kept)
    outbox = Outbox(db, {}, OutboxSettings())
    outbox._closing = True  # recover only; nothing is delivered
    await outbox.recover()
    (left,) = _spooled(spool)
    assert left.name != "left-by-a-crash-before-commit"
    assert left.read_bytes() == b"kept", "the copy of the pending row stays"


async def test_a_file_that_grows_past_the_limit_while_copied_is_refused(tmp_path: Path) -> None:
    spool = FileSpool(tmp_path / "spool")
    path = tmp_path / "growing.log"
    path.write_bytes(b"x" * 100)
    source, fd = _source(path)
    path.write_bytes(b"x" * 5000)  # grew after it was checked
    try:
        with pytest.raises(FileTooLargeError):
            await spool.take(source, 1000)
    finally:
        os.close(fd)
    assert _spooled(spool) == []


async def test_discard_never_removes_outside_the_spool(tmp_path: Path) -> None:
    spool = FileSpool(tmp_path / "spool")
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    await spool.discard([str(outside)])
    assert await asyncio.to_thread(outside.read_text) == "keep me"
