"""The fake Slack's external file upload, as ``files_upload_v2`` drives it.

``files.getUploadURLExternal`` (``filename``, ``length``) hands out an upload URL on this
server and a file id; the client POSTs the bytes there; ``files.completeUploadExternal``
(``files`` as JSON ``[{"id", "title"}]``, ``channel_id``, ``thread_ts``) shares them. Only
then does the file show in the channel: :meth:`Uploads.uploads` lists shared files with
their name, size and sha256.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

MAX_FILE = 1024 * 1024 * 1024


@dataclass
class _Pending:
    name: str
    length: int
    data: bytes | None = None


@dataclass(frozen=True)
class SharedFile:
    """A file shared into a channel (a thread when ``thread_ts`` is set)."""

    channel: str
    thread_ts: str | None
    file_id: str
    name: str
    title: str
    size: int
    sha256: str


class Uploads:
    """Upload methods and the upload route; mixed into :class:`FakeSlack` with the Web API."""

    base_url: str
    _methods: dict[str, Any]
    _channel_errors: dict[str, str]

    def _init_uploads(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._upload_ids = itertools.count(1)
        self.shared_files: list[SharedFile] = []
        self.upload_posts = 0  # POSTs of bytes to upload URLs, failed ones included
        self._methods["files.getUploadURLExternal"] = self._get_upload_url
        self._methods["files.completeUploadExternal"] = self._complete_upload

    def uploads(self, channel: str) -> list[SharedFile]:
        """Files shared into ``channel``, in order."""
        return [f for f in self.shared_files if f.channel == channel]

    def _get_upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("filename")
        try:
            length = int(params.get("length", ""))
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        if not name or length <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        if length > MAX_FILE:
            return {"ok": False, "error": "file_too_large"}
        file_id = f"F{next(self._upload_ids):07d}U"
        self._pending[file_id] = _Pending(str(name), length)
        return {"ok": True, "upload_url": f"{self.base_url}/upload/v1/{file_id}", "file_id": file_id}

    async def _receive_upload(self, request: web.Request) -> web.Response:
        self.upload_posts += 1
        pending = self._pending.get(request.match_info["file_id"])
        if pending is None:
            return web.Response(status=404, text="upload not found")
        data = await request.read()
        if len(data) != pending.length:
            return web.Response(status=400, text=f"expected {pending.length} bytes, got {len(data)}")
        pending.data = data
        return web.Response(text=f"OK - {len(data)}")

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            files = json.loads(params.get("files") or "")
        except ValueError:
            return {"ok": False, "error": "invalid_arguments"}
        channel = str(params.get("channel_id") or "")
        if not isinstance(files, list) or not files or not channel:
            return {"ok": False, "error": "invalid_arguments"}
        if channel in self._channel_errors:
            return {"ok": False, "error": self._channel_errors[channel]}
        done = []
        for item in files:
            pending = self._pending.get(str(item.get("id"))) if isinstance(item, dict) else None
            if pending is None or pending.data is None:
                return {"ok": False, "error": "file_not_found"}
            done.append((str(item["id"]), str(item.get("title") or pending.name), pending))
        out = []
        for file_id, title, pending in done:
            del self._pending[file_id]
            assert pending.data is not None
            digest = hashlib.sha256(pending.data).hexdigest()
            thread_ts = params.get("thread_ts") or None
            self.shared_files.append(
                SharedFile(channel, thread_ts, file_id, pending.name, title, len(pending.data), digest)
            )
            out.append({"id": file_id, "title": title, "name": pending.name, "size": len(pending.data)})
        return {"ok": True, "files": out}
