"""Files the bot shares in Slack: the external-upload flow through slack_sdk's client against
the fake, each file shared once in its thread with its bytes and name; failures before the
share are retried safely, a failed share is classified like a post."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from connectors.base import ErrorClass, OutboundFile, ThreadKey
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack.conftest import running

CHANNEL = "C0FILES"
_ids = itertools.count(1)


def item(path: Path, name: str, *, topic: str | None = None) -> OutboundFile:
    return OutboundFile(
        next(_ids), ThreadKey("team-slack", CHANNEL, topic), str(path), name, path.stat().st_size, None
    )


async def test_a_file_is_shared_once_in_its_thread_with_its_bytes_and_name(
    fake: FakeSlack, files_dir: Path, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 6000  # ~1.5 MB, past aiohttp's default body limit
    path = tmp_path / "copy"
    path.write_bytes(data)
    async with running(fake, files_dir) as (connector, _):
        result = await connector.send_file(item(path, "export.csv", topic="1700000000.000100"))
    assert result.ok
    (shared,) = fake.uploads(CHANNEL)
    assert (shared.name, shared.title, shared.size) == ("export.csv", "export.csv", len(data))
    assert shared.sha256 == hashlib.sha256(data).hexdigest()
    assert shared.thread_ts == "1700000000.000100"
    assert result.platform_message_id == shared.file_id
    assert [m for m, _ in fake.state.calls if m.startswith("files.")] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


async def test_a_failure_before_the_share_is_retried_and_a_refused_share_is_final(
    fake: FakeSlack, files_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "copy"
    path.write_text("a,b\n1,2\n")
    async with running(fake, files_dir) as (connector, _):
        fake.fail_next("files.getUploadURLExternal", "internal_error", status=500)
        before = await connector.send_file(item(path, "a.csv"))
        fake.fail_channel(CHANNEL, "not_in_channel")
        refused = await connector.send_file(item(path, "a.csv"))
    # A 5xx from getUploadURLExternal is ambiguous for a post, but nothing is visible yet.
    assert before.error_class is ErrorClass.TRANSIENT
    assert refused.error_class is ErrorClass.PERMANENT and "not_in_channel" in (refused.error or "")
    assert fake.uploads(CHANNEL) == []


async def test_a_share_that_may_have_happened_is_ambiguous(
    fake: FakeSlack, files_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "copy"
    path.write_text("x")
    async with running(fake, files_dir) as (connector, _):
        fake.fail_next("files.completeUploadExternal", "internal_error", status=500)
        result = await connector.send_file(item(path, "x.txt"))
    assert result.error_class is ErrorClass.AMBIGUOUS
