"""The fake Slack's Web API (``/api/<method>``) and file downloads."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.slack_api.editing import Editing
from tests.fakes.slack_api.model import (
    APP_ID,
    BOT_ID,
    BOT_NAME,
    BOT_USER_ID,
    MAX_TEXT,
    TEAM_ID,
    HostedFile,
    PostedMessage,
    Scripted,
    State,
    User,
    channel_type,
)

_LOGIN_PAGE = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"


class WebApi:
    """Web API routes and their test controls; mixed into :class:`FakeSlack`."""

    bot_token: str
    app_token: str
    port: int
    echo_bot_messages: bool
    refuse_sockets: bool
    state: State

    def _init_web_api(self) -> None:
        self._scripted: defaultdict[str, list[Scripted]] = defaultdict(list)
        self._channel_errors: dict[str, str] = {}
        self._users: dict[str, User] = {}
        self._files: dict[str, HostedFile] = {}
        self._ids = itertools.count(1)
        self._last_us = 0
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post_message,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "users.info": self._users_info,
        }
        self._methods.update(Editing(self.state, self._next_ts).methods())

    @property
    def base_url(self) -> str:
        """The Web API root to configure as ``api_base_url``."""
        return f"http://127.0.0.1:{self.port}"

    def add_user(
        self, user_id: str, name: str, *, real_name: str | None = None, display_name: str = ""
    ) -> None:
        """Register a user for ``users.info``."""
        self._users[user_id] = User(user_id, name, real_name or name.title(), display_name)

    def add_file(
        self, name: str, content: bytes, *, mimetype: str = "text/plain", declared_size: int | None = None
    ) -> dict[str, Any]:
        """Host a file; returns the file object to pass as ``files=[...]`` to :meth:`inject_message`.

        ``declared_size`` overrides the ``size`` Slack reports (to test the streaming cap).
        """
        file_id = f"F{next(self._ids):08d}"
        self._files[file_id] = HostedFile(file_id, name, content, mimetype)
        url = f"{self.base_url}/files-pri/{TEAM_ID}-{file_id}/download/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1] if "." in name else "binary",
            "size": len(content) if declared_size is None else declared_size,
            "mode": "hosted",
            "url_private": url.replace("/download/", "/"),
            "url_private_download": url,
        }

    def fail_next(
        self, method: str, error: str, *, status: int = 200, retry_after: float | None = None
    ) -> None:
        """Make the next call of ``method`` fail with Slack error ``error`` (and ``Retry-After``)."""
        self._scripted[method].append(Scripted(error, status, retry_after))

    def stall_next(self, method: str, seconds: float) -> None:
        """Carry out the next call of ``method`` but answer only after ``seconds``."""
        self._scripted[method].append(Scripted(None, delay=seconds))

    def fail_channel(self, channel: str, error: str = "channel_not_found") -> None:
        """Every post to ``channel`` fails with ``error`` (``not_in_channel``, ``is_archived``...)."""
        self._channel_errors[channel] = error

    async def _download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_key"].rsplit("-", 1)[-1]
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(text=_LOGIN_PAGE, content_type="text/html")  # what Slack does
        stored = self._files.get(file_id)
        if stored is None:
            return web.Response(status=404, text="file not found")
        self.state.downloads.append(file_id)
        return web.Response(body=stored.content, content_type=stored.mimetype)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    params.update(body)
            else:
                form = await request.post()
                params.update({k: v for k, v in form.items() if isinstance(v, str)})
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.pop("token", None)
        params.pop("token", None)
        self.state.calls.append((method, params))
        self.state.call_times.append(time.time())
        scripted = self._scripted[method].pop(0) if self._scripted.get(method) else None
        if scripted is not None and scripted.error is not None:
            headers = {"Retry-After": f"{scripted.retry_after:g}"} if scripted.retry_after is not None else {}
            return web.json_response(
                {"ok": False, "error": scripted.error}, status=scripted.status, headers=headers
            )
        handler = self._methods.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        problem = self._auth_problem(method, token)
        if problem:
            return web.json_response({"ok": False, "error": problem})
        if method == "apps.connections.open" and self.refuse_sockets:
            return web.json_response({"ok": False, "error": "service_unavailable"}, status=503)
        result = handler(params)
        if scripted is not None and scripted.delay:
            await asyncio.sleep(scripted.delay)
        return web.json_response(result)

    def _auth_problem(self, method: str, token: str | None) -> str | None:
        if not token:
            return "not_authed"
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token == wanted:
            return None
        if token in (self.app_token, self.bot_token):
            return "not_allowed_token_type"
        return "invalid_auth"

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake-team.slack.com/",
            "team": "Fake Team",
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket?ticket={uuid.uuid4()}&app_id={APP_ID}"}

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        text = params.get("text") or ""
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel in self._channel_errors:
            return {"ok": False, "error": self._channel_errors[channel]}
        if not isinstance(text, str) or (not text.strip() and not params.get("blocks")):
            return {"ok": False, "error": "no_text"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        ts = self._next_ts()
        thread_ts = params.get("thread_ts") or None
        mrkdwn = params.get("mrkdwn")
        if isinstance(mrkdwn, str):
            mrkdwn = mrkdwn.lower() in ("1", "true")
        self.state.posted[channel].append(PostedMessage(channel, ts, text, thread_ts, mrkdwn, dict(params)))
        self.state.authors[(channel, ts)] = BOT_USER_ID
        message = {
            "type": "message",
            "text": text,
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "ts": ts,
            "team": TEAM_ID,
        }
        if thread_ts:
            message["thread_ts"] = thread_ts
        if self.echo_bot_messages:
            echo = {**message, "channel": channel, "event_ts": ts, "channel_type": channel_type(channel)}
            self._echo(echo)
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _reaction_target(self, params: dict[str, Any]) -> tuple[tuple[str, str], str] | None:
        channel, ts, name = params.get("channel"), params.get("timestamp"), params.get("name")
        if not channel or not ts or not name:
            return None
        return (str(channel), str(ts)), str(name)

    def _reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        target = self._reaction_target(params)
        if target is None:
            return {"ok": False, "error": "invalid_arguments"}
        key, name = target
        if name in self.state.reactions[key]:
            return {"ok": False, "error": "already_reacted"}
        self.state.reactions[key].add(name)
        self.state.reaction_log.append(("reactions.add", *key, name))
        return {"ok": True}

    def _reactions_remove(self, params: dict[str, Any]) -> dict[str, Any]:
        target = self._reaction_target(params)
        if target is None:
            return {"ok": False, "error": "invalid_arguments"}
        key, name = target
        if name not in self.state.reactions[key]:
            return {"ok": False, "error": "no_reaction"}
        self.state.reactions[key].discard(name)
        self.state.reaction_log.append(("reactions.remove", *key, name))
        return {"ok": True}

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self._users.get(str(params.get("user")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {
            "ok": True,
            "user": {
                "id": user.id,
                "team_id": TEAM_ID,
                "name": user.name,
                "real_name": user.real_name,
                "is_bot": user.is_bot,
                "profile": {"real_name": user.real_name, "display_name": user.display_name},
            },
        }

    # ------------------------------------------------------------ provided by the server

    def _echo(self, event: dict[str, Any]) -> None:
        """Deliver the bot's own message back as an event (the server implements it)."""
        raise NotImplementedError

    def _next_ts(self) -> str:
        # Slack ts: epoch seconds with microseconds, unique per channel; strictly increasing here.
        micros = max(int(time.time() * 1_000_000), self._last_us + 1)
        self._last_us = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"
