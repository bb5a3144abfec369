"""The Discord connector (discord.py): gateway in, REST messages out.

See :class:`DiscordConnector`. Modules: ``client`` (discord.py client with per-connector
endpoints), ``inbound`` (message -> event, attachments), ``lanes`` (ordered intake per chat),
``outbound`` (send and error classes), ``working`` (typing indicator).
"""

from connectors.discord_bot.connector import DiscordConnector

__all__ = ["DiscordConnector"]
