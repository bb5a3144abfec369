"""The fake Discord's message edits and deletes: ``PATCH`` and ``DELETE``
``/channels/{cid}/messages/{mid}`` on the bot's own messages (Unknown Message, 10008, when
gone). Each edit keeps the text it replaced and its ``time.monotonic()``, so tests can check
what a preview showed and how fast it was edited."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

_MAX_CONTENT = 2000


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


class Editing:
    """Routes over the fake's sent messages (``sent(cid)`` lists the records of a channel)."""

    def __init__(
        self, sent: Callable[[str], list[dict[str, Any]]], messages: dict[str, dict[str, Any]]
    ) -> None:
        self._sent = sent
        self._messages = messages

    def routes(self) -> list[web.RouteDef]:
        path = "/api/v10/channels/{cid}/messages/{mid}"
        return [web.patch(path, self._edit), web.delete(path, self._delete)]

    def _record(self, request: web.Request) -> dict[str, Any] | None:
        cid, mid = request.match_info["cid"], request.match_info["mid"]
        found = next((m for m in self._sent(cid) if m.get("id") == mid), None)
        return None if found is None or found.get("deleted") else found

    async def _edit(self, request: web.Request) -> web.Response:
        record = self._record(request)
        if record is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        body = await request.json()
        content = body.get("content")
        if isinstance(content, str):
            if len(content) > _MAX_CONTENT:
                return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
            record.setdefault("versions", []).append(record.get("content", ""))
            record.setdefault("edit_times", []).append(time.monotonic())
            record["content"] = content
            if record["id"] in self._messages:
                self._messages[record["id"]]["content"] = content
        if "components" in body:
            record["components"] = list(body.get("components") or [])
        return _json({k: v for k, v in record.items() if k not in ("versions", "edit_times", "files")})

    async def _delete(self, request: web.Request) -> web.Response:
        record = self._record(request)
        if record is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        record["deleted"] = True
        self._messages.pop(record["id"], None)
        return web.Response(status=204)
