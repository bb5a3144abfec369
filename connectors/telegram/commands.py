"""The bot's command menu: ``setMyCommands`` with the gateway's chat commands, at start.

Telegram shows the menu when a user types ``/`` in any chat with the bot. Registration is
best effort: a refusal or a network failure is logged and the channel runs on (typed
commands work without a menu).
"""

from __future__ import annotations

import asyncio
import logging

from telegram import BotCommand
from telegram.error import TelegramError

from connectors.telegram.api import TelegramBot, redact
from gateway.command_table import CHAT_COMMANDS

log = logging.getLogger("talon.connectors.telegram")

REGISTER_TIMEOUT = 15.0  # seconds; start-up does not wait longer for the menu


def command_menu() -> list[BotCommand]:
    return [BotCommand(c.name, c.summary) for c in CHAT_COMMANDS]


async def register_commands(bot: TelegramBot, channel: str) -> bool:
    """Set the default-scope command menu; False (logged) when Telegram did not take it."""
    try:
        async with asyncio.timeout(REGISTER_TIMEOUT):
            await bot.set_my_commands(command_menu())
    except (TelegramError, TimeoutError) as exc:
        log.warning(
            "%s: could not register the command menu (setMyCommands): %s; typed commands still work",
            channel,
            redact(str(exc), bot.token) or type(exc).__name__,
        )
        return False
    return True
