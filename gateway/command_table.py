"""The one table of chat commands: each command's name and the line that says what it does.

``/help`` prints it, and every platform's command registration reads it (Telegram's command
menu, Discord's application commands, the Slack manifest in the docs). Names are lower-case
letters, digits and underscores, at most 32 (Telegram and Discord); summaries stay within 100
characters (Discord's limit for a command description).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHAT_COMMANDS", "ChatCommand", "command_names", "help_text"]


@dataclass(frozen=True, slots=True)
class ChatCommand:
    name: str  # without the slash: "stop"
    summary: str

    @property
    def slash(self) -> str:
        return f"/{self.name}"


CHAT_COMMANDS: tuple[ChatCommand, ...] = (
    ChatCommand("stop", "Cancel the reply being written"),
    ChatCommand("new", "Start a new conversation here (earlier messages leave the context)"),
    ChatCommand("usage", "Tokens and cost of this conversation and yours, today and this month"),
    ChatCommand("help", "List these commands"),
)


def command_names() -> frozenset[str]:
    """The commands with their slash: ``{"/stop", "/new", ...}``."""
    return frozenset(c.slash for c in CHAT_COMMANDS)


def help_text() -> str:
    """``/help``'s answer: one line per command."""
    lines = [f"- {c.slash} — {c.summary}" for c in CHAT_COMMANDS]
    return "Commands:\n\n" + "\n".join(lines)
