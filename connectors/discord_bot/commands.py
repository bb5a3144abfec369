"""Discord application commands: the chat commands as global slash commands.

At start the connector makes the application's global commands include one slash command
per chat command (:data:`gateway.command_table.CHAT_COMMANDS`), usable in servers and in the
bot's DMs; it writes them only when they differ from what Discord has, and keeps any other
commands of the application. Best effort: a failure is logged and typed ``/stop`` messages
work as before.

A slash command arrives as INTERACTION_CREATE of type 2 (APPLICATION_COMMAND). It names the
channel it was typed in, a thread included, so it steers that conversation (keyed as the
messages there are). The interaction is answered at once with a deferred, ephemeral
response (Discord allows 3 s), the command goes through the intake, and its answer then
replaces the "thinking" placeholder, visible only to the user who typed it.

Interaction responses go through discord.py's HTTP client (``client.http.request``): its
``InteractionResponse`` helpers build URLs from the process-wide ``Route.BASE`` and would
ignore this channel's ``api_base_url``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord
from discord.http import Route

from connectors.base import ChatType, InboundEvent, IntakeHandler, IntakeStatus, Sender, ThreadKey
from connectors.policy import ChannelPolicy
from gateway.command_table import CHAT_COMMANDS, command_names, help_text

log = logging.getLogger("talon.connectors.discord")

APPLICATION_COMMAND = 2
DEFERRED_CHANNEL_MESSAGE = 5
EPHEMERAL = 1 << 6
_THREAD_TYPES = frozenset({10, 11, 12})  # announcement, public and private threads
_FAILURES = (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError)


def command_payload() -> list[dict[str, Any]]:
    """The chat commands as Discord slash commands, for servers and the bot's DMs."""
    return [
        {"name": c.name, "description": c.summary, "type": 1, "contexts": [0, 1], "integration_types": [0]}
        for c in CHAT_COMMANDS
    ]


def _shape(command: dict[str, Any]) -> tuple[str, str, int]:
    return str(command.get("name")), str(command.get("description", "")), int(command.get("type", 1))


async def register_commands(client: discord.Client, channel: str) -> bool:
    """Make the global commands include the chat commands; False (logged) when that failed."""
    app_id = client.application_id
    if app_id is None:
        log.warning("%s: no application id after login; application commands not registered", channel)
        return False
    wanted = command_payload()
    try:
        current = await client.http.get_global_commands(app_id)
        ours = {c["name"] for c in wanted}
        kept = [c for c in current if c.get("name") not in ours]
        if {_shape(c) for c in current if c.get("name") in ours} == {_shape(c) for c in wanted}:
            return True
        await client.http.bulk_upsert_global_commands(app_id, [*kept, *wanted])
    except _FAILURES as exc:
        log.warning(
            "%s: could not register the application commands (%s); typed commands still work",
            channel,
            _short(exc),
        )
        return False
    log.info("%s: registered the application commands %s", channel, ", ".join(sorted(ours)))
    return True


def interaction_origin(raw: dict[str, Any]) -> tuple[str, str | None, ChatType] | None:
    """``(chat_id, topic, chat_type)`` as messages in that channel are keyed, or None."""
    channel = raw.get("channel")
    channel_id = raw.get("channel_id")
    if not isinstance(channel_id, str) or not channel_id.isdigit():
        return None
    if not raw.get("guild_id"):
        return channel_id, None, "dm"
    if isinstance(channel, dict) and channel.get("type") in _THREAD_TYPES:
        parent = channel.get("parent_id")
        if isinstance(parent, str) and parent.isdigit():
            return parent, channel_id, "thread"
    return channel_id, None, "group"


async def post_interaction_callback(
    client: discord.Client, interaction: discord.Interaction, body: dict[str, Any]
) -> None:
    """Answer an interaction (``POST .../callback``) through the client's own HTTP session, so
    the channel's ``api_base_url`` holds (discord.py's interaction helpers use the global base)."""
    route = Route(
        "POST",
        "/interactions/{interaction_id}/{interaction_token}/callback",
        interaction_id=interaction.id,
        interaction_token=interaction.token,
    )
    await client.http.request(route, json=body)


class ApplicationCommands:
    """Answers application command interactions.

    Args:
        channel: the Talon channel name.
        client: returns the logged-in client (replaced when the gateway restarts).
        policy: who may reach the bot; refused users get no answer, as for messages.
        intake: the gateway's intake, or None while stopping.
    """

    def __init__(
        self,
        *,
        channel: str,
        client: Callable[[], discord.Client | None],
        policy: ChannelPolicy,
        intake: Callable[[], IntakeHandler | None],
    ):
        self._channel = channel
        self._client = client
        self._policy = policy
        self._intake = intake

    async def handle(self, interaction: discord.Interaction, raw: dict[str, Any]) -> None:
        data = raw.get("data")
        name = data.get("name") if isinstance(data, dict) else None
        origin = interaction_origin(raw)
        user = interaction.user
        if not isinstance(name, str) or origin is None or not user:
            log.warning(
                "%s: skipped a malformed application command interaction (keys %s)",
                self._channel,
                sorted(raw),
            )
            return
        chat_id, topic, chat_type = origin
        if not self._policy.admits(str(user.id), chat_id, is_bot=bool(user.bot)):
            return
        if not await self._respond(
            interaction, {"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}}
        ):
            return
        text = f"/{name.lower()}"
        if text not in command_names():
            await self._answer(interaction, f"/{name} is not a command here.\n\n{help_text()}")
            return
        intake = self._intake()
        event = InboundEvent(
            channel=self._channel,
            event_id=f"interaction:{interaction.id}",
            thread_key=ThreadKey(self._channel, chat_id, topic),
            chat_type=chat_type,
            sender=Sender(str(user.id), user.display_name, is_bot=bool(user.bot)),
            text=text,
            mentions_bot=True,
            native_command=True,
            raw=raw,
        )
        try:
            if intake is None:
                raise RuntimeError("the channel is stopping")
            result = await intake(event)
        except Exception as exc:
            log.warning("%s: intake failed for application command %s (%r)", self._channel, text, exc)
            await self._answer(interaction, f"Could not take {text} just now; please try again.")
            return
        if result.status is IntakeStatus.UNROUTED:
            await self._answer(interaction, "No persona answers in this chat, so there is nothing to steer.")
        else:
            await self._answer(interaction, result.reply or "Done.")

    async def _respond(self, interaction: discord.Interaction, body: dict[str, Any]) -> bool:
        client = self._client()
        if client is None:
            return False
        try:
            await post_interaction_callback(client, interaction, body)
        except _FAILURES as exc:
            log.warning(
                "%s: could not answer interaction %s (%s)", self._channel, interaction.id, _short(exc)
            )
            return False
        return True

    async def _answer(self, interaction: discord.Interaction, content: str) -> None:
        """Replace the deferred response's placeholder with ``content``."""
        client = self._client()
        if client is None:
            return
        route = Route(
            "PATCH",
            "/webhooks/{application_id}/{interaction_token}/messages/@original",
            application_id=interaction.application_id,
            interaction_token=interaction.token,
        )
        body = {"content": content[:2000], "allowed_mentions": {"parse": []}}
        try:
            await client.http.request(route, json=body)
        except _FAILURES as exc:
            log.warning(
                "%s: could not show the answer to interaction %s (%s)",
                self._channel,
                interaction.id,
                _short(exc),
            )


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
