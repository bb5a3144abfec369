"""Downloading Slack files: the token goes only to Slack, and a sign-in page is not a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from connectors.slack.files import FileDownloader
from tests.fakes.slack_api import FakeSlack


def _downloader(session: aiohttp.ClientSession, fake: FakeSlack, token: str) -> FileDownloader:
    return FileDownloader(session, token=token, trusted_hosts={"127.0.0.1"}, max_bytes=10_000, read_timeout=2)


async def test_missing_files_scope_is_reported_not_saved(fake: FakeSlack, tmp_path: Path) -> None:
    meta = fake.add_file("data.csv", b"a,b\n1,2\n", mimetype="text/csv")
    async with aiohttp.ClientSession() as session:
        result = await _downloader(session, fake, "xoxb-without-files-read").fetch_all(
            (meta,), tmp_path / "d"
        )
    assert result.attachments == []
    assert result.notes == [
        "[attachment data.csv skipped: Slack returned a sign-in page; the app needs the files:read scope]"
    ]
    assert await asyncio.to_thread(lambda: list((tmp_path / "d").glob("*"))) == []


async def test_token_is_never_sent_outside_slack(fake: FakeSlack, tmp_path: Path) -> None:
    foreign = {
        "id": "F1",
        "name": "x.txt",
        "size": 3,
        "url_private_download": "https://files.example.com/x.txt",
    }
    plain_http = {
        "id": "F2",
        "name": "y.txt",
        "size": 3,
        "url_private_download": "http://files.slack.com/y.txt",
    }
    gone = {"id": "F3", "name": "z.txt", "mode": "tombstone"}
    async with aiohttp.ClientSession() as session:
        downloader = _downloader(session, fake, fake.bot_token)
        result = await downloader.fetch_all((foreign, plain_http, gone), tmp_path)
    assert result.attachments == []
    assert result.notes == [
        "[attachment x.txt skipped: it is not hosted by Slack]",
        "[attachment y.txt skipped: it is not hosted by Slack]",
        "[attachment z.txt skipped: Slack gave no download link]",
    ]
    assert downloader.trusts("https://files.slack.com/files-pri/T1-F1/download/a.txt")
    assert not downloader.trusts("https://slack.com.evil.example/a.txt")


async def test_private_url_is_used_when_there_is_no_download_url(fake: FakeSlack, tmp_path: Path) -> None:
    meta = fake.add_file("note.txt", b"hello")
    del meta["url_private_download"]
    async with aiohttp.ClientSession() as session:
        result = await _downloader(session, fake, fake.bot_token).fetch_all((meta,), tmp_path)
    [attachment] = result.attachments
    assert await asyncio.to_thread(Path(attachment.path).read_bytes) == b"hello"
    assert attachment.mime_type == "text/plain"
