"""The bot's command menus, as ``setMyCommands`` / ``getMyCommands`` / ``deleteMyCommands`` keep them.

Menus are kept per scope and language, validated as the Bot API does: at most 100 commands,
names of 1-32 lower-case letters, digits and underscores, descriptions of 1-256 characters.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.telegram_api.state import bad_request

_NAME = re.compile(r"[a-z0-9_]{1,32}")


def _menu_key(params: dict[str, Any]) -> tuple[str, str]:
    scope = params.get("scope") or {"type": "default"}
    if isinstance(scope, str):
        scope = json.loads(scope)
    return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")


class CommandMenus:
    """Every menu set so far: ``menus[(scope json, language)]`` is the list of commands."""

    def __init__(self) -> None:
        self.menus: dict[tuple[str, str], list[dict[str, str]]] = {}

    def default(self) -> list[dict[str, str]] | None:
        """The menu every chat sees, or ``None`` when none was set."""
        return self.menus.get(_menu_key({}))

    async def set(self, params: dict[str, Any]) -> bool:
        commands = params.get("commands")
        if isinstance(commands, str):
            commands = json.loads(commands)
        if not isinstance(commands, list) or len(commands) > 100:
            raise bad_request("commands must be a list of at most 100 BotCommand objects")
        for command in commands:
            if not isinstance(command, dict) or not _NAME.fullmatch(str(command.get("command", ""))):
                raise bad_request("BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
        self.menus[_menu_key(params)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    async def get(self, params: dict[str, Any]) -> list[dict[str, str]]:
        return self.menus.get(_menu_key(params), [])

    async def delete(self, params: dict[str, Any]) -> bool:
        self.menus.pop(_menu_key(params), None)
        return True
