"""Files the bot posts on Discord: discord.py's multipart attachment against the fake, each
file once with its bytes and name, a resend of the same delivery answered by its nonce, and
a file over the server's limit refused for good."""

from __future__ import annotations

import hashlib
from pathlib import Path

from connectors.base import ErrorClass, OutboundFile, ThreadKey
from tests.fakes.discord_api import FakeDiscord
from tests.integration.discord.conftest import CHANNEL, StartConnector


def item(delivery_id: int, path: Path, name: str, chat: str, topic: str | None = None) -> OutboundFile:
    return OutboundFile(delivery_id, ThreadKey(CHANNEL, chat, topic), str(path), name, path.stat().st_size)


async def test_a_file_arrives_once_in_its_thread_with_its_bytes_and_name(
    fake: FakeDiscord, start_connector: StartConnector, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 8000  # 2 MB
    path = tmp_path / "copy"
    path.write_bytes(data)
    connector, _ = await start_connector()
    result = await connector.send_file(item(1, path, "logs.tar.gz", fake.channel_id, fake.thread_id))
    assert result.ok
    (message,) = fake.sent(fake.thread_id)
    (received,) = message["files"]
    assert (received["filename"], received["size"]) == ("logs.tar.gz", len(data))
    assert received["sha256"] == hashlib.sha256(data).hexdigest()
    assert message["id"] == result.platform_message_id
    assert message["allowed_mentions"] == {"parse": []}
    assert fake.sent(fake.channel_id) == []


async def test_the_same_delivery_sent_again_shows_once(
    fake: FakeDiscord, start_connector: StartConnector, tmp_path: Path
) -> None:
    path = tmp_path / "copy"
    path.write_bytes(b"quarterly numbers")
    connector, _ = await start_connector()
    first = await connector.send_file(item(7, path, "q.csv", fake.channel_id))
    again = await connector.send_file(item(7, path, "q.csv", fake.channel_id))
    other = await connector.send_file(item(8, path, "q.csv", fake.channel_id))
    assert first.platform_message_id == again.platform_message_id != other.platform_message_id
    assert len(fake.sent(fake.channel_id)) == 2


async def test_a_file_over_the_servers_limit_is_permanent(
    fake: FakeDiscord, start_connector: StartConnector, tmp_path: Path
) -> None:
    path = tmp_path / "copy"
    path.write_bytes(b"\0" * (10 * 1024 * 1024 + 1))
    connector, _ = await start_connector(max_upload_bytes=50_000_000)  # configured past the server's
    result = await connector.send_file(item(1, path, "huge.bin", fake.channel_id))
    assert result.error_class is ErrorClass.PERMANENT and "40005" in (result.error or "")
    assert fake.sent(fake.channel_id) == []
