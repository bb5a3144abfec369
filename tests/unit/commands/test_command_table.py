"""The one table of chat commands: what /help prints and every platform registers."""

from __future__ import annotations

import re

from gateway.command_table import CHAT_COMMANDS, help_text
from gateway.commands import COMMANDS, ChatCommands, command_of


def test_every_command_in_the_table_has_a_handler_and_a_registrable_name() -> None:
    commands = ChatCommands(None, cancel=lambda thread_id: False, notice=None)  # type: ignore[arg-type]
    for command in CHAT_COMMANDS:
        assert commands.handles(command.slash), command.name
        # Telegram's and Discord's rules for a command name; Discord's 100 for a description.
        assert re.fullmatch(r"[a-z0-9_]{1,32}", command.name), command.name
        assert 3 <= len(command.summary) <= 100, command.name
    assert {"/stop", "/new", "/help"} <= COMMANDS


def test_help_lists_every_command_with_its_summary() -> None:
    text = help_text()
    for command in CHAT_COMMANDS:
        assert f"{command.slash} — {command.summary}" in text


def test_command_of_reads_the_first_word_only() -> None:
    assert command_of("/help") == "/help"
    assert command_of("  /STOP now please") == "/stop"
    assert command_of("/new\nsecond line") == "/new"
    assert command_of("/helpme") is None
    assert command_of("please /stop") is None
    assert command_of("") is None
    assert command_of("/unknown") is None
