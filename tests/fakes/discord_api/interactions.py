"""Interactions on the fake Discord: INTERACTION_CREATE of any type, the callback endpoint, and
the interaction webhooks (original response and followups), shaped as Discord sends them.

A test makes a user tap a component (:meth:`Interactions.tap`) or send any interaction
(:meth:`Interactions.inject`); the bot answers with ``POST /interactions/{id}/{token}/callback``
(once: a second callback is refused with 40060 "already acknowledged", an unknown id or token
with 10062 "Unknown interaction"), then may read or edit ``/webhooks/{app}/{token}/messages/@original``
and post followups to ``/webhooks/{app}/{token}``. Callback type 7 (UPDATE_MESSAGE) edits the
message the component was on; type 4 creates the original response message in the channel.
These routes need no ``Authorization`` header, as on Discord: the token in the path is the key.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import payloads as p

PING = 1
APPLICATION_COMMAND = 2
MESSAGE_COMPONENT = 3
AUTOCOMPLETE = 4
MODAL_SUBMIT = 5

# callback types
PONG = 1
CHANNEL_MESSAGE = 4
DEFERRED_CHANNEL_MESSAGE = 5
DEFERRED_UPDATE_MESSAGE = 6
UPDATE_MESSAGE = 7
_CALLBACK_TYPES = {1, 4, 5, 6, 7, 8, 9, 12}
_ATTACHMENT_LIMIT = 10 * 1024 * 1024


@dataclass
class Interaction:
    """One interaction the fake dispatched and what the bot answered to it."""

    id: str
    token: str
    type: int
    channel_id: str
    user_id: str
    message_id: str | None
    callbacks: list[dict[str, Any]] = field(default_factory=list)  # every accepted callback body
    refused_callbacks: int = 0
    original_id: str | None = None  # the message the response created or updated
    followups: list[str] = field(default_factory=list)


class Interactions:
    """The interaction state of one fake Discord.

    Args:
        app_id: the application id (the bot's user id on the fake).
        channels / messages / users: the fake's own tables (shared, not copied).
        dispatch: sends a gateway dispatch to every connection.
        record_sent: records a message the bot created in a channel (for ``FakeDiscord.sent``).
    """

    def __init__(
        self,
        *,
        app_id: str,
        guild_id: str,
        bot_user: dict[str, Any],
        channels: dict[str, dict[str, Any]],
        messages: dict[str, dict[str, Any]],
        users: dict[str, dict[str, Any]],
        dispatch: Callable[[str, dict[str, Any]], None],
        record_sent: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.app_id = app_id
        self.guild_id = guild_id
        self.bot_user = bot_user
        self.channels = channels
        self.messages = messages
        self.users = users
        self.dispatch = dispatch
        self.record_sent = record_sent
        self.by_id: dict[str, Interaction] = {}
        self.by_token: dict[str, Interaction] = {}
        self.message_edits: dict[str, list[dict[str, Any]]] = {}

    # ---------------------------------------------------------------- test side

    def inject(
        self,
        type: int,
        data: dict[str, Any] | None,
        *,
        channel_id: str,
        user_id: str,
        message_id: str | None = None,
        interaction_id: str | None = None,
        token: str | None = None,
    ) -> Interaction:
        """Dispatch INTERACTION_CREATE; a channel not known to the fake is a DM with the user.

        ``interaction_id``/``token`` repeat an earlier interaction's (a redelivery)."""
        user = self.users.get(user_id) or p.user(user_id, f"user{user_id[-4:]}")
        self.users.setdefault(user_id, user)
        channel = self.channels.setdefault(channel_id, p.dm_channel(channel_id, user))
        iid = interaction_id or p.snowflake()
        earlier = self.by_id.get(iid)
        record = earlier or Interaction(
            id=iid,
            token=token or f"itoken-{secrets.token_urlsafe(24)}",
            type=type,
            channel_id=channel_id,
            user_id=user_id,
            message_id=message_id,
        )
        self.by_id[record.id] = record
        self.by_token[record.token] = record
        payload: dict[str, Any] = {
            "id": record.id,
            "application_id": self.app_id,
            "type": type,
            "token": record.token,
            "version": 1,
            "channel_id": channel_id,
            "channel": {k: v for k, v in channel.items() if k != "recipients"},
            "app_permissions": "1071698660929",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": self.guild_id},
            "attachment_size_limit": _ATTACHMENT_LIMIT,
        }
        if data is not None:
            payload["data"] = data
        if "guild_id" in channel:
            payload["guild_id"] = channel["guild_id"]
            payload["guild_locale"] = "en-US"
            payload["member"] = {**p.member(), "user": user, "permissions": "1071698660929"}
            payload["context"] = 0
        else:
            payload["user"] = user
            payload["context"] = 1
        if message_id is not None and message_id in self.messages:
            payload["message"] = self.messages[message_id]
        self.dispatch("INTERACTION_CREATE", payload)
        return record

    def tap(
        self,
        message_id: str,
        custom_id: str,
        *,
        user_id: str,
        values: list[str] | None = None,
        interaction_id: str | None = None,
        token: str | None = None,
    ) -> Interaction:
        """A user clicks a button (or picks ``values`` in a string select) on a bot message."""
        message = self.messages[message_id]
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": 2 if values is None else 3}
        if values is not None:
            data["values"] = list(values)
        return self.inject(
            MESSAGE_COMPONENT,
            data,
            channel_id=message["channel_id"],
            user_id=user_id,
            message_id=message_id,
            interaction_id=interaction_id,
            token=token,
        )

    def components(self, message_id: str) -> list[dict[str, Any]]:
        """The message's components now (after any UPDATE_MESSAGE or webhook edit)."""
        return list(self.messages[message_id].get("components") or [])

    # ---------------------------------------------------------------- REST

    def routes(self) -> list[web.RouteDef]:
        base = "/api/v10"
        hook = base + "/webhooks/{app}/{token}"
        return [
            web.post(base + "/interactions/{iid}/{token}/callback", self._callback),
            web.get(hook + "/messages/@original", self._get_original),
            web.patch(hook + "/messages/@original", self._edit_original),
            web.delete(hook + "/messages/@original", self._delete_original),
            web.post(hook, self._followup),
            web.patch(hook + "/messages/{mid}", self._edit_followup),
        ]

    @staticmethod
    def is_public(path: str) -> bool:
        return path.startswith("/api/v10/interactions/") or path.startswith("/api/v10/webhooks/")

    async def _callback(self, request: web.Request) -> web.Response:
        record = self.by_id.get(request.match_info["iid"])
        if record is None or record.token != request.match_info["token"]:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        body = await _read_json(request)
        if body is None or body.get("type") not in _CALLBACK_TYPES:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        if record.callbacks:
            record.refused_callbacks += 1
            return _json({"message": "Interaction has already been acknowledged.", "code": 40060}, status=400)
        record.callbacks.append(body)
        kind = body["type"]
        data = body.get("data") or {}
        resource: dict[str, Any] | None = None
        if kind == UPDATE_MESSAGE and record.message_id in self.messages:
            resource = self._edit(record.message_id, data)
            record.original_id = record.message_id
        elif kind == DEFERRED_UPDATE_MESSAGE and record.message_id:
            record.original_id = record.message_id
        elif kind in (CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE):
            resource = self._create(record.channel_id, data if kind == CHANNEL_MESSAGE else {"content": ""})
            record.original_id = resource["id"]
        if request.query.get("with_response") not in ("1", "true"):
            return web.Response(status=204)
        answer: dict[str, Any] = {
            "interaction": {
                "id": record.id,
                "type": record.type,
                "response_message_loading": kind == DEFERRED_CHANNEL_MESSAGE,
                "response_message_ephemeral": bool((data.get("flags") or 0) & 64),
                **({"response_message_id": record.original_id} if record.original_id else {}),
            }
        }
        if resource is not None:
            answer["resource"] = {"type": kind, "message": resource}
        return _json(answer)

    def _record_for_hook(self, request: web.Request) -> Interaction | None:
        record = self.by_token.get(request.match_info["token"])
        if record is None or request.match_info["app"] != self.app_id:
            return None
        return record

    async def _get_original(self, request: web.Request) -> web.Response:
        record = self._record_for_hook(request)
        if record is None or record.original_id not in self.messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        return _json(self.messages[record.original_id])  # type: ignore[index]

    async def _edit_original(self, request: web.Request) -> web.Response:
        record = self._record_for_hook(request)
        if record is None or record.original_id not in self.messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        body = await _read_json(request)
        if body is None:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        return _json(self._edit(record.original_id, body))  # type: ignore[arg-type]

    async def _delete_original(self, request: web.Request) -> web.Response:
        record = self._record_for_hook(request)
        if record is None or record.original_id not in self.messages:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        self.messages[record.original_id]["deleted"] = True  # type: ignore[index]
        return web.Response(status=204)

    async def _followup(self, request: web.Request) -> web.Response:
        record = self._record_for_hook(request)
        if record is None:
            return _json({"message": "Unknown Webhook", "code": 10015}, status=404)
        if not record.callbacks:
            return _json({"message": "Unknown interaction", "code": 10062}, status=404)
        body = await _read_json(request)
        if body is None or not (body.get("content") or body.get("embeds") or body.get("components")):
            return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
        message = self._create(record.channel_id, body)
        record.followups.append(message["id"])
        return _json(message)

    async def _edit_followup(self, request: web.Request) -> web.Response:
        record = self._record_for_hook(request)
        mid = request.match_info["mid"]
        if record is None or mid not in record.followups:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        body = await _read_json(request)
        if body is None:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        return _json(self._edit(mid, body))

    # ---------------------------------------------------------------- messages

    def _create(self, channel_id: str, body: dict[str, Any]) -> dict[str, Any]:
        channel = self.channels.get(channel_id, {})
        message = p.message(
            message_id=p.snowflake(),
            channel_id=channel_id,
            author=self.bot_user,
            content=str(body.get("content") or ""),
            guild_id=channel.get("guild_id"),
        )
        message["components"] = list(body.get("components") or [])
        message["flags"] = int(body.get("flags") or 0)
        message["application_id"] = self.app_id
        self.messages[message["id"]] = message
        self.record_sent(channel_id, message)
        return message

    def _edit(self, message_id: str, body: dict[str, Any]) -> dict[str, Any]:
        message = self.messages[message_id]
        for key in ("content", "components", "embeds", "flags"):
            if key in body and body[key] is not None:
                message[key] = body[key]
        message["edited_timestamp"] = p.iso_now()
        self.message_edits.setdefault(message_id, []).append(body)
        return message


def _json(data: Any, status: int = 200) -> web.Response:
    # Content-Type exactly application/json: discord.py reads anything else as text.
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


async def _read_json(request: web.Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except Exception:
        return None
    return body if isinstance(body, dict) else None
