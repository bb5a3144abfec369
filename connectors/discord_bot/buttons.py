"""Message components on Discord: prompts with buttons or a string select, and their taps.

A component's ``custom_id`` is ``t:<prompt id>:<option id>`` (a select's is ``t:<prompt id>:_``,
its values option ids; :mod:`connectors.interactive`). A tap (INTERACTION_CREATE type 3) becomes
an :class:`~connectors.base.InboundEvent` whose ``event_id`` is the interaction id; it is
acknowledged with a deferred update (type 6) once intake returned, and, when the tap was
refused, a short ephemeral followup says why. Closing a prompt edits its message to the
outcome with no components. Requests go through the connector's own HTTP client, whose base
URL is the channel's (discord.py's interaction helpers use the process-wide one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord
from discord.http import Route

from connectors.base import ErrorClass, InboundEvent, IntakeHandler, Sender, SendResult, ThreadKey
from connectors.discord_bot.commands import interaction_origin, post_interaction_callback
from connectors.discord_bot.outbound import classify_http_error
from connectors.interactive import (
    Prompt,
    callback_data,
    numbered_text,
    parse_callback,
    parse_select,
    select_id,
)
from connectors.policy import ChannelPolicy

__all__ = ["ComponentTaps", "close_prompt", "components_of", "send_prompt"]

log = logging.getLogger("talon.connectors.discord")

MESSAGE_COMPONENT = 3
DEFERRED_UPDATE = 6
EPHEMERAL = 1 << 6
_STYLES = {"primary": 1, "default": 2, "danger": 4}
_NO_MENTIONS = {"parse": []}
_FAILURES = (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError)


def _target(thread: ThreadKey) -> str:
    return thread.topic or thread.chat_id


def components_of(prompt: Prompt) -> list[dict[str, Any]]:
    """Action rows: up to five buttons each, or one string select (many options, or several at once)."""
    if prompt.use_select():
        picks = [o for o in prompt.options if o.id != "skip"]
        select = {
            "type": 3,
            "custom_id": select_id(prompt.id),
            "options": [{"label": o.label[:100], "value": o.id} for o in picks[:25]],
            "min_values": 1,
            "max_values": len(picks[:25]) if prompt.multi else 1,
        }
        rows = [{"type": 1, "components": [select]}]
        skip = [o for o in prompt.options if o.id == "skip"]
        if skip:
            rows.append({"type": 1, "components": [_button(prompt, skip[0])]})
        return rows
    buttons = [_button(prompt, o) for o in prompt.options]
    return [{"type": 1, "components": buttons[i : i + 5]} for i in range(0, len(buttons), 5)]


def _button(prompt: Prompt, option: Any) -> dict[str, Any]:
    return {
        "type": 2,
        "style": _STYLES.get(option.style, 2),
        "label": option.label[:80],
        "custom_id": callback_data(prompt.id, option.id),
    }


async def send_prompt(client: discord.Client, thread: ThreadKey, prompt: Prompt) -> SendResult:
    content = numbered_text(prompt) if prompt.use_select() else prompt.text
    body = {"content": content[:2000], "components": components_of(prompt), "allowed_mentions": _NO_MENTIONS}
    route = Route("POST", "/channels/{channel_id}/messages", channel_id=_target(thread))
    try:
        message = await client.http.request(route, json=body)
    except discord.HTTPException as exc:
        return classify_http_error(exc)
    except _FAILURES as exc:
        return SendResult.failed(ErrorClass.TRANSIENT, f"discord: {exc!r}")
    return SendResult.sent(str(message["id"]))


async def close_prompt(client: discord.Client, thread: ThreadKey, message_id: str, text: str) -> None:
    route = Route(
        "PATCH",
        "/channels/{channel_id}/messages/{message_id}",
        channel_id=_target(thread),
        message_id=message_id,
    )
    try:
        await client.http.request(
            route, json={"content": text[:2000], "components": [], "allowed_mentions": _NO_MENTIONS}
        )
    except _FAILURES as exc:
        log.warning("could not close a prompt's buttons: %r", exc)


class ComponentTaps:
    """Turns component interactions into taps for intake and acknowledges them."""

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
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        custom_id = data.get("custom_id")
        values = data.get("values")
        tap = parse_select(custom_id, values) if isinstance(values, list) else parse_callback(custom_id)
        origin = interaction_origin(raw)
        user = interaction.user
        if tap is None or origin is None or user is None:
            await self._respond(interaction, {"type": DEFERRED_UPDATE})
            return
        chat_id, topic, chat_type = origin
        if not self._policy.admits(str(user.id), chat_id, is_bot=bool(user.bot)):
            return
        event = InboundEvent(
            channel=self._channel,
            event_id=f"interaction:{interaction.id}",
            thread_key=ThreadKey(self._channel, chat_id, topic),
            chat_type=chat_type,
            sender=Sender(str(user.id), user.display_name, is_bot=bool(user.bot)),
            text="",
            platform_message_id=_message_id(raw),
            raw=raw,
            tap=tap,
        )
        intake = self._intake()
        if intake is None:
            return  # not acknowledged: Discord shows the tap as failed and the user may tap again
        result = await intake(event)
        if not await self._respond(interaction, {"type": DEFERRED_UPDATE}):
            return
        if result.reply and not result.reply.startswith("Got it"):
            await self._followup(interaction, result.reply)

    async def _respond(self, interaction: discord.Interaction, body: dict[str, Any]) -> bool:
        client = self._client()
        if client is None:
            return False
        try:
            await post_interaction_callback(client, interaction, body)
        except _FAILURES as exc:
            log.info("%s: could not acknowledge a button tap (%r)", self._channel, exc)
            return False
        return True

    async def _followup(self, interaction: discord.Interaction, text: str) -> None:
        client = self._client()
        if client is None:
            return
        route = Route(
            "POST",
            "/webhooks/{application_id}/{interaction_token}",
            application_id=interaction.application_id,
            interaction_token=interaction.token,
        )
        try:
            await client.http.request(route, json={"content": text[:2000], "flags": EPHEMERAL})
        except _FAILURES as exc:
            log.info("%s: could not tell a user why their tap was refused (%r)", self._channel, exc)


def _message_id(raw: dict[str, Any]) -> str | None:
    """The id of the message whose component was used (the prompt)."""
    message = raw.get("message")
    value = message.get("id") if isinstance(message, dict) else None
    return str(value) if isinstance(value, str | int) else None
