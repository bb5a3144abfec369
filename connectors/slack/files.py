"""Download the files attached to a Slack message, within a size cap.

Slack serves ``url_private_download`` only with the bot token as a Bearer header, so the
token is sent only to Slack's own hosts (or the configured API host); a file on any other
host is skipped. Skipped files leave a note for the transcript instead of failing the
message.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import aiohttp

from connectors.base import Attachment

log = logging.getLogger("talon.slack")

_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
_CHUNK = 64 * 1024


@dataclass(slots=True)
class Downloads:
    attachments: list[Attachment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def human_size(size: int) -> str:
    """``30000000`` -> ``"30 MB"``; decimal units, as Slack shows them."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def safe_file_name(file_id: str, name: str) -> str:
    """A file-system safe name, prefixed with Slack's file id so a redelivery overwrites
    the same file instead of piling up copies."""
    base = _UNSAFE.sub("_", Path(name).name).strip(" .") or "file"
    return f"{_UNSAFE.sub('_', file_id)}_{base[:120]}"


class FileDownloader:
    """Fetches Slack files with the bot token.

    Args:
        session: the connector's HTTP session.
        token: the bot token (files:read scope).
        trusted_hosts: hosts besides ``slack.com`` / ``*.slack.com`` that may receive the token.
        max_bytes: files larger than this are skipped with a note.
        read_timeout: seconds to wait for the next block of data (a large file may take
            longer than that in total).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        token: str,
        trusted_hosts: set[str],
        max_bytes: int,
        read_timeout: float = 30.0,
    ):
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=read_timeout, sock_read=read_timeout)
        self._token = token
        self._trusted = {h.lower() for h in trusted_hosts}
        self.max_bytes = max_bytes

    def trusts(self, url: str) -> bool:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("https", "http") or not host:
            return False
        if host in self._trusted:
            return True
        return parts.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com"))

    async def fetch_all(self, files: tuple[dict[str, Any], ...], dest: Path) -> Downloads:
        result = Downloads()
        for index, meta in enumerate(files):
            name = str(meta.get("name") or meta.get("title") or f"file-{index + 1}")
            try:
                attachment = await self._fetch(meta, name, dest)
            except _Skipped as skip:
                result.notes.append(f"[attachment {name} skipped: {skip}]")
                continue
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning("slack file %s could not be downloaded: %s", name, type(exc).__name__)
                result.notes.append(f"[attachment {name} could not be downloaded: {type(exc).__name__}]")
                continue
            result.attachments.append(attachment)
        return result

    async def _fetch(self, meta: dict[str, Any], name: str, dest: Path) -> Attachment:
        url = meta.get("url_private_download") or meta.get("url_private")
        if not isinstance(url, str):
            raise _Skipped("Slack gave no download link")
        if not self.trusts(url):
            raise _Skipped("it is not hosted by Slack")
        declared = meta.get("size")
        limit = human_size(self.max_bytes)
        if isinstance(declared, int) and declared > self.max_bytes:
            raise _Skipped(f"{human_size(declared)} over the {limit} limit")
        mime = meta.get("mimetype") if isinstance(meta.get("mimetype"), str) else None
        path = dest / safe_file_name(str(meta.get("id") or "F"), name)
        partial = path.with_name(path.name + ".part")
        headers = {"Authorization": f"Bearer {self._token}"}
        written = 0
        try:
            async with self._session.get(url, headers=headers, timeout=self._timeout) as resp:
                if resp.status != 200:
                    raise _Skipped(f"Slack answered HTTP {resp.status}")
                # Without files:read Slack answers 200 with its sign-in page instead of the file.
                if resp.content_type == "text/html" and mime != "text/html":
                    raise _Skipped("Slack returned a sign-in page; the app needs the files:read scope")
                out = await asyncio.to_thread(_open_for_writing, partial)
                try:
                    async for block in resp.content.iter_chunked(_CHUNK):
                        written += len(block)
                        if written > self.max_bytes:
                            raise _Skipped(f"over the {limit} limit")
                        await asyncio.to_thread(out.write, block)
                finally:
                    await asyncio.to_thread(out.close)
            await asyncio.to_thread(partial.replace, path)
        finally:
            await asyncio.to_thread(partial.unlink, missing_ok=True)
        return Attachment(name=name, path=str(path), mime_type=mime, size=written)


class _Skipped(Exception):
    pass


def _open_for_writing(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")
