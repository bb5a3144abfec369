"""A stand-in Telegram Bot API server on 127.0.0.1 for tests.

It speaks the real wire protocol closely enough for python-telegram-bot to work
unmodified: ``/bot<token>/<method>`` with JSON, form-encoded or multipart bodies (uploads with ``sendDocument`` and ``sendPhoto``
are kept in :attr:`received_files` with their name, size and sha256), the
``{"ok": ..., "result": ...}`` envelope, error codes and descriptions as Telegram words
them, long-polling ``getUpdates`` with offset confirmation, webhooks with the secret
header, and file downloads under ``/file/bot<token>/``.

Example:
    .. code:: python

        async with FakeTelegramAPI() as fake:
            bot = Bot(fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)
            fake.inject_message(42, "hello", user_id=42)
            await fake.wait_for_sent(42, 1, timeout=5)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.telegram_api.callbacks import CallbackQueries
from tests.fakes.telegram_api.commands import CommandMenus
from tests.fakes.telegram_api.messages import (
    ReceivedFile,
    SentMessage,
    StoredFile,
    photo_sizes,
    text_fields,
    user_object,
)
from tests.fakes.telegram_api.state import ApiError, BotApiState, bad_request

DEFAULT_TOKEN = "7000001:AAH-fake-token-for-tests_0123456789"
# Form fields that are strings even when they look like JSON ("123" stays "123").
_STRING_FIELDS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "action",
        "url",
        "secret_token",
        "file_id",
        "document",
        "photo",
        "voice",
    }
)


class FakeTelegramAPI(BotApiState):
    """The fake server; an async context manager that listens on 127.0.0.1, port 0.

    Args:
        token: the one token the server accepts; others get 401 Unauthorized.
        bot_username: the bot's @username (without @).
        webhook_retry_delay: seconds between webhook redelivery attempts.

    Attributes:
        url: the server root, e.g. ``http://127.0.0.1:54321`` (set once entered).
        calls: every API call as ``(method, params)`` in arrival order.
        call_times: ``time.monotonic()`` of each entry of :attr:`calls`.
        webhook_attempts: ``(update_id, HTTP status or -1 on connection error)`` per
            webhook delivery attempt.
    """

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_username: str = "talon_test_bot",
        webhook_retry_delay: float = 0.05,
    ) -> None:
        super().__init__(token, bot_username)
        self.webhook_retry_delay = webhook_retry_delay
        self.url = ""
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.call_times: list[float] = []
        self.webhook_attempts: list[tuple[int, int]] = []
        self.download_gate: asyncio.Event | None = None  # file downloads wait for it when set
        self.downloads_in_flight = 0
        self.most_downloads_in_flight = 0
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._poll_generation = 0
        self._failures: dict[str, deque[ApiError]] = defaultdict(deque)
        self._hangs: dict[str, deque[bool]] = defaultdict(deque)
        self._webhook: dict[str, Any] | None = None
        self._webhook_task: asyncio.Task[None] | None = None
        self.command_menus = CommandMenus()
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "getme": self.get_me,
            "getupdates": self._get_updates,
            "sendmessage": self.send_message,
            "editmessagetext": self.edit_message_text,
            "deletemessage": self.delete_message,
            "sendmessagedraft": self.send_message_draft,
            "sendchataction": self.send_chat_action,
            "senddocument": self.send_document,
            "sendphoto": self.send_photo,
            "sendvoice": self.send_voice,
            "getfile": self.get_file,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "setmycommands": self.command_menus.set,
            "getmycommands": self.command_menus.get,
            "deletemycommands": self.command_menus.delete,
        }
        self.callbacks = CallbackQueries(self, self.inject_update)
        self._handlers.update(self.callbacks.handlers(self.send_message, self.edit_message_text))

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeTelegramAPI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._on_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._on_file)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        self._wake()
        await self._stop_webhook()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ test helpers

    @property
    def base_url(self) -> str:
        """What PTB's ``base_url`` must be set to."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def inject_message(
        self,
        chat_id: int,
        text: str = "",
        *,
        user_id: int,
        chat_type: str = "private",
        message_thread_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        reply_to_bot: bool = False,
        document: tuple[str, bytes] | tuple[str, bytes, str] | None = None,
        photo: bytes | None = None,
        voice: bytes | None = None,
        audio: tuple[str, bytes, str] | None = None,
        media_group_id: str | None = None,
        is_bot: bool = False,
        first_name: str | None = None,
        username: str | None = None,
    ) -> int:
        """Queue an incoming message as Telegram would deliver it; returns its update_id.

        ``entities`` default to what Telegram derives itself (mentions, bot commands).
        ``message_thread_id`` makes it a forum-topic message. With ``document``
        (``(name, bytes[, mime])``), ``photo``, ``voice`` (OGG/Opus bytes of a voice note) or
        ``audio`` (``(name, bytes, mime)``, a music file) the text becomes the caption.
        ``chat_type="channel"`` produces a ``channel_post`` with ``sender_chat``.
        """
        user = user_object(
            user_id, is_bot=is_bot, first_name=first_name or f"User{user_id}", username=username
        )
        chat = self.add_chat(chat_id, chat_type, forum=message_thread_id is not None, user_id=user_id)
        message_id = next(self._message_ids[chat_id])
        message: dict[str, Any] = {"message_id": message_id, "date": int(time.time()), "chat": chat}
        if chat_type == "channel":
            message["sender_chat"] = chat
        else:
            message["from"] = user
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
            message["is_topic_message"] = True
        has_file = document is not None or photo is not None or voice is not None or audio is not None
        message.update(text_fields(text, entities, caption=has_file))
        if document is not None:
            name, content, *rest = document
            stored = self._store_file(content, "documents", name, rest[0] if rest else None)
            message["document"] = {
                "file_id": stored.file_id,
                "file_unique_id": stored.file_unique_id,
                "file_name": name,
                "file_size": len(content),
                **({"mime_type": stored.mime_type} if stored.mime_type else {}),
            }
        if photo is not None:
            small = self._store_file(photo[: max(1, len(photo) // 8)], "photos", "small.jpg", "image/jpeg")
            large = self._store_file(photo, "photos", "large.jpg", "image/jpeg")
            message["photo"] = photo_sizes([small, large])
        if voice is not None:
            stored = self._store_file(voice, "voice", "file.oga", "audio/ogg")
            message["voice"] = {**_media(stored), "duration": 1, "mime_type": "audio/ogg"}
        if audio is not None:
            name, content, mime = audio
            stored = self._store_file(content, "music", name, mime)
            message["audio"] = {**_media(stored), "duration": 1, "file_name": name, "mime_type": mime}
        if media_group_id is not None:
            message["media_group_id"] = media_group_id  # one photo of an album
        if reply_to_bot:
            message["reply_to_message"] = self._last_bot_message(chat_id, chat)
        self._messages[chat_id][message_id] = message
        key = "channel_post" if chat_type == "channel" else "message"
        return self.inject_update({key: message})

    def inject_update(self, payload: dict[str, Any]) -> int:
        """Queue any update body (``update_id`` is assigned); returns the update_id."""
        update_id = next(self._update_ids)
        update = {"update_id": update_id, **payload}
        self._injected[update_id] = update
        self._updates.append(update)
        self._wake()
        return update_id

    def injected(self, update_id: int) -> dict[str, Any]:
        """The update as queued (including confirmed ones), e.g. to read its message_id."""
        return self._injected[update_id]

    def redeliver(self, update_id: int) -> None:
        """Queue an update again, as Telegram does when it never got the confirmation
        (a webhook answer lost on the way, or a bot that stopped before its next
        ``getUpdates`` carried the new offset)."""
        self._updates.append(self._injected[update_id])
        self._wake()

    def pending_update_ids(self) -> list[int]:
        """Updates not yet confirmed by the bot (by offset or a 2xx webhook answer)."""
        return [u["update_id"] for u in self._updates]

    def sent_messages(self, chat_id: int | str) -> list[SentMessage]:
        return list(self._sent.get(chat_id, ()))

    def delete_as_user(self, chat_id: int | str, message_id: int) -> None:
        """Delete one of the bot's messages as a chat admin would (edits then fail)."""
        for sent in self._sent.get(chat_id, ()):
            if sent.message_id == message_id:
                sent.deleted = True
        self._messages[chat_id].pop(message_id, None)

    def visible_messages(self, chat_id: int | str) -> list[SentMessage]:
        """The bot's messages the chat still shows (deleted ones left out), as last edited."""
        return [m for m in self._sent.get(chat_id, ()) if not m.deleted]

    def files_received(self, chat_id: int | str) -> list[ReceivedFile]:
        """Files the bot uploaded into ``chat_id``, in order."""
        return [f for f in self.received_files if f.chat_id == chat_id]

    def chat_actions(self, chat_id: int | str) -> list[str]:
        return [a for a, _, _ in self._actions.get(chat_id, ())]

    def chat_action_log(self, chat_id: int | str) -> list[tuple[str, int | None, float]]:
        """``(action, message_thread_id, time.monotonic())`` of each chat action in ``chat_id``."""
        return list(self._actions.get(chat_id, ()))

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [p for m, p in self.calls if m == method.lower()]

    def call_times_of(self, method: str) -> list[float]:
        """``time.monotonic()`` of each call of ``method``, in order."""
        return [t for (m, _), t in zip(self.calls, self.call_times, strict=True) if m == method.lower()]

    async def wait_for_sent(self, chat_id: int | str, n: int, timeout: float = 5.0) -> list[SentMessage]:
        """Wait until ``chat_id`` has at least ``n`` sent messages; TimeoutError otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            signal = self._signal
            if len(self._sent.get(chat_id, ())) >= n:
                return self.sent_messages(chat_id)
            remaining = deadline - loop.time()
            if remaining <= 0:
                got = len(self._sent.get(chat_id, ()))
                raise TimeoutError(f"chat {chat_id}: {got} message(s) sent, expected {n}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), remaining)

    async def wait_for_call(self, method: str, n: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until ``method`` was called at least ``n`` times."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.calls_to(method)) < n:
            if asyncio.get_running_loop().time() >= deadline:
                raise TimeoutError(f"{method} called {len(self.calls_to(method))} time(s), expected {n}")
            await asyncio.sleep(0.01)
        return self.calls_to(method)

    def fail_next(
        self, method: str, status: int, description: str, retry_after: int | None = None, *, times: int = 1
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error.

        ``retry_after`` adds ``parameters.retry_after`` (Telegram's flood control).
        """
        params = {"retry_after": retry_after} if retry_after is not None else None
        for _ in range(times):
            self._failures[method.lower()].append(ApiError(status, description, params))

    def hang_next(self, method: str, *, deliver: bool = False) -> None:
        """Never answer the next call of ``method``; with ``deliver`` it still takes effect.

        The request stays open until :meth:`drop_connections` or the server stops.
        """
        self._hangs[method.lower()].append(deliver)

    def drop_connections(self) -> None:
        """Close every open client connection, as a network failure would."""
        if self._runner is not None and self._runner.server is not None:
            for handler in self._runner.server.connections:
                handler.force_close()

    # ------------------------------------------------------------------ HTTP layer

    async def _on_api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error_response(ApiError(401, "Unauthorized"))
        method = request.match_info["method"].lower()
        try:
            params = await _read_params(request)
        except ValueError as exc:
            return _error_response(bad_request(str(exc)))
        self.calls.append((method, params))
        self.call_times.append(time.monotonic())
        if self._failures[method]:
            return _error_response(self._failures[method].popleft())
        handler = self._handlers.get(method)
        if handler is None:
            return _error_response(ApiError(404, "Not Found"))
        if self._hangs[method]:
            deliver = self._hangs[method].popleft()
            if deliver:
                with contextlib.suppress(ApiError):
                    await handler(params)
            await self._closing.wait()
            return _error_response(ApiError(502, "Bad Gateway"))
        try:
            result = await handler(params)
        except ApiError as exc:
            return _error_response(exc)
        return web.json_response({"ok": True, "result": result})

    async def _on_file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error_response(ApiError(401, "Unauthorized"))
        path = request.match_info["path"]
        stored = next((f for f in self._files.values() if f.file_path == path), None)
        if stored is None:
            return _error_response(ApiError(404, "Not Found"))
        self.downloads_in_flight += 1
        self.most_downloads_in_flight = max(self.most_downloads_in_flight, self.downloads_in_flight)
        try:
            if self.download_gate is not None:
                await self.download_gate.wait()
        finally:
            self.downloads_in_flight -= 1
        return web.Response(body=stored.content, content_type="application/octet-stream")

    # ------------------------------------------------------------------ methods

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self._webhook is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        allowed = params.get("allowed_updates")
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        if allowed:
            # Telegram drops updates of kinds the bot did not ask for.
            self._updates = [u for u in self._updates if any(k in u for k in allowed)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake()  # an older pending call now ends with 409
        while True:
            signal = self._signal
            if generation != self._poll_generation:
                raise ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; "
                    "make sure that only one bot instance is running",
                )
            remaining = deadline - loop.time()
            if self._updates or remaining <= 0 or self._closing.is_set():
                return self._updates[:limit]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), remaining)

    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url") or ""
        if not url:
            return await self._delete_webhook(params)
        if not url.startswith(("http://", "https://")):
            raise bad_request("bad webhook: An HTTPS URL must be provided for webhook")
        if params.get("drop_pending_updates"):
            self._updates.clear()
        await self._stop_webhook()
        self._webhook = {"url": url, "secret_token": params.get("secret_token")}
        self._webhook_task = asyncio.create_task(self._deliver_webhooks())
        return True

    async def _delete_webhook(self, params: dict[str, Any]) -> bool:
        if params.get("drop_pending_updates"):
            self._updates.clear()
        await self._stop_webhook()
        return True

    async def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        url = self._webhook["url"] if self._webhook else ""
        return {"url": url, "has_custom_certificate": False, "pending_update_count": len(self._updates)}

    # ------------------------------------------------------------------ webhook delivery

    async def _deliver_webhooks(self) -> None:
        """Post pending updates one at a time until each gets a 2xx, like Telegram."""
        assert self._webhook is not None
        hook = self._webhook
        headers = {"Content-Type": "application/json"}
        if hook["secret_token"]:
            headers["X-Telegram-Bot-Api-Secret-Token"] = hook["secret_token"]
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not self._closing.is_set():
                while not self._updates and not self._closing.is_set():
                    await self._signal.wait()
                if self._closing.is_set():
                    return
                update = self._updates[0]
                try:
                    async with session.post(hook["url"], data=json.dumps(update), headers=headers) as resp:
                        status = resp.status
                except (aiohttp.ClientError, TimeoutError):
                    status = -1
                self.webhook_attempts.append((update["update_id"], status))
                if 200 <= status < 300:
                    if self._updates and self._updates[0] is update:
                        self._updates.pop(0)
                else:
                    await asyncio.sleep(self.webhook_retry_delay)

    async def _stop_webhook(self) -> None:
        self._webhook = None
        task, self._webhook_task = self._webhook_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ------------------------------------------------------------------ internals


async def _read_params(request: web.Request) -> dict[str, Any]:
    """Query string plus a JSON, form-encoded or multipart body, values JSON-decoded."""
    params: dict[str, Any] = {k: _coerce(k, v) for k, v in request.query.items()}
    if not request.can_read_body:
        return params
    if request.content_type == "application/json":
        body = await request.json()
        if not isinstance(body, dict):
            raise ValueError("request body must be a JSON object")
        params.update(body)
        return params
    form = await request.post()
    for key, value in form.items():
        if isinstance(value, web.FileField):
            params[key] = {
                "filename": value.filename,
                "content": value.file.read(),
                "content_type": value.content_type,
            }
        else:
            params[key] = _coerce(key, value)
    return params


def _coerce(key: str, value: Any) -> Any:
    if not isinstance(value, str) or key in _STRING_FIELDS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _error_response(exc: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": exc.status, "description": exc.description}
    if exc.parameters:
        body["parameters"] = exc.parameters
    return web.json_response(body, status=exc.status)


def _media(stored: StoredFile) -> dict[str, Any]:
    """The file fields of a voice or audio object in a message."""
    return {
        "file_id": stored.file_id,
        "file_unique_id": stored.file_unique_id,
        "file_size": len(stored.content),
    }
