"""Files the bot sends: each arrives once with its bytes and name, pictures as photos, and
refusals come back classified for the outbox (PTB's multipart upload against the fake)."""

from __future__ import annotations

import hashlib
import itertools
import struct
import zlib
from pathlib import Path

from connectors.base import ErrorClass, OutboundFile, ThreadKey
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.telegram.conftest import CHANNEL, StartConnector

USER = 4242
FORUM = -1009876543210
_ids = itertools.count(1)


def png_bytes() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def item(path: Path, chat: int, *, mime: str | None = None, topic: str | None = None) -> OutboundFile:
    return OutboundFile(
        next(_ids), ThreadKey(CHANNEL, str(chat), topic), str(path), path.name, path.stat().st_size, mime
    )


async def test_a_document_arrives_once_with_its_bytes_and_name(
    fake: FakeTelegramAPI, start_connector: StartConnector, tmp_path: Path
) -> None:
    fake.add_chat(USER)
    data = bytes(range(256)) * 4000  # ~1 MB, binary
    path = tmp_path / "spooled-copy"
    path.write_bytes(data)
    connector, _ = await start_connector()
    result = await connector.send_file(
        OutboundFile(next(_ids), ThreadKey(CHANNEL, str(USER)), str(path), "report.bin", len(data), None)
    )
    assert result.ok and result.platform_message_id
    (received,) = fake.files_received(USER)
    assert (received.method, received.name, received.size) == ("sendDocument", "report.bin", len(data))
    assert received.sha256 == hashlib.sha256(data).hexdigest()
    assert str(received.message_id) == result.platform_message_id


async def test_a_picture_goes_as_a_photo_into_its_forum_topic(
    fake: FakeTelegramAPI, start_connector: StartConnector, tmp_path: Path
) -> None:
    fake.add_chat(FORUM, "supergroup", forum=True)
    path = tmp_path / "chart.png"
    path.write_bytes(png_bytes())
    connector, _ = await start_connector()
    result = await connector.send_file(item(path, FORUM, mime="image/png", topic="77"))
    assert result.ok
    (received,) = fake.files_received(FORUM)
    assert (received.method, received.name) == ("sendPhoto", "chart.png")
    assert fake.sent_messages(FORUM)[0].message_thread_id == 77


async def test_a_picture_over_the_photo_limit_or_one_telegram_cannot_decode_goes_as_a_document(
    fake: FakeTelegramAPI, start_connector: StartConnector, tmp_path: Path
) -> None:
    fake.add_chat(USER)
    big = tmp_path / "big.png"
    big.write_bytes(png_bytes() + b"\x00" * 5000)
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not really a jpeg")
    connector, _ = await start_connector(max_photo_bytes=1000)
    assert (await connector.send_file(item(big, USER, mime="image/png"))).ok
    assert (await connector.send_file(item(broken, USER, mime="image/jpeg"))).ok
    received = fake.files_received(USER)
    assert [(f.method, f.name) for f in received] == [
        ("sendDocument", "big.png"),
        ("sendDocument", "broken.jpg"),
    ]
    assert len(fake.calls_to("sendPhoto")) == 1, "only the small broken picture was tried as a photo"
    assert len(fake.sent_messages(USER)) == 2, "each file shows once"


async def test_refusals_are_classified_for_the_outbox(
    fake: FakeTelegramAPI, start_connector: StartConnector, tmp_path: Path
) -> None:
    fake.add_chat(USER)
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    connector, _ = await start_connector()
    fake.fail_next("sendDocument", 429, "Too Many Requests: retry after 3", retry_after=3)
    limited = await connector.send_file(item(path, USER))
    fake.fail_next("sendDocument", 403, "Forbidden: bot was blocked by the user")
    blocked = await connector.send_file(item(path, USER))
    assert (limited.error_class, limited.retry_after) == (ErrorClass.TRANSIENT, 3.0)
    assert blocked.error_class is ErrorClass.PERMANENT
    assert fake.files_received(USER) == []
