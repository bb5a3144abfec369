"""Global application commands on the fake Discord: ``GET`` and ``PUT
/applications/{application_id}/commands`` (bulk overwrite), validated as Discord does.

A name is 1-32 lower-case letters, digits, ``-`` or ``_``; a slash command's description is
1-100 characters; at most 100 commands. ``puts`` counts the overwrites, so a test can tell
that an unchanged set was not written again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import payloads as p

_NAME = re.compile(r"[-_a-z0-9]{1,32}")


class AppCommands:
    """The application's global commands (shared with the fake's other routes)."""

    def __init__(self, *, app_id: str) -> None:
        self.app_id = app_id
        self.commands: list[dict[str, Any]] = []
        self.puts = 0
        self.fail_next_put: int | None = None  # answer the next PUT with this status

    def by_name(self, name: str) -> dict[str, Any]:
        return next(c for c in self.commands if c["name"] == name)

    def routes(self) -> list[web.RouteDef]:
        path = "/api/v10/applications/{app}/commands"
        return [web.get(path, self._list), web.put(path, self._overwrite)]

    async def _list(self, request: web.Request) -> web.Response:
        if request.match_info["app"] != self.app_id:
            return _json({"message": "Unknown Application", "code": 10002}, status=404)
        return _json(self.commands)

    async def _overwrite(self, request: web.Request) -> web.Response:
        if request.match_info["app"] != self.app_id:
            return _json({"message": "Unknown Application", "code": 10002}, status=404)
        if self.fail_next_put is not None:
            status, self.fail_next_put = self.fail_next_put, None
            return _json({"message": "scripted failure", "code": 0}, status=status)
        try:
            body = await request.json()
        except ValueError:
            body = None
        problem = _problem(body)
        if problem:
            return _json({"message": "Invalid Form Body", "code": 50035, "errors": problem}, status=400)
        self.puts += 1
        self.commands = [
            {
                "id": p.snowflake(),
                "application_id": self.app_id,
                "version": p.snowflake(),
                "type": int(c.get("type", 1)),
                "name": c["name"],
                "description": c.get("description", ""),
                "options": c.get("options", []),
                "contexts": c.get("contexts"),
                "integration_types": c.get("integration_types", [0]),
                "default_member_permissions": c.get("default_member_permissions"),
                "nsfw": False,
            }
            for c in body
        ]
        return _json(self.commands)


def _problem(body: Any) -> str | None:
    if not isinstance(body, list) or len(body) > 100:
        return "body must be a list of at most 100 commands"
    for index, command in enumerate(body):
        if not isinstance(command, dict) or not _NAME.fullmatch(str(command.get("name", ""))):
            return f"{index}.name: must be 1-32 lower-case letters, digits, - or _"
        if int(command.get("type", 1)) == 1 and not 1 <= len(str(command.get("description", ""))) <= 100:
            return f"{index}.description: must be 1-100 characters"
    return None


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )
