"""A Discord REST API + gateway websocket on 127.0.0.1 that discord.py talks to unmodified.

Use it as an async context manager::

    async with FakeDiscord() as fake:
        settings = DiscordChannel(name="d", type="discord", token=fake.token,
                                  api_base_url=fake.api_base_url, gateway_url=fake.gateway_url)
        ...
        fake.inject_message(fake.channel_id, "hello", author_id=fake.user_id, mention_bot=True)
        await fake.wait_for_sent(fake.channel_id, 1, timeout=5)

REST lives under ``/api/v10`` (JSON responses carry ``Content-Type: application/json``
exactly, which discord.py requires); the gateway is at ``/gateway``; attachment files are
served from ``/attachments/...``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import payloads as p
from tests.fakes.discord_api.app_commands import AppCommands
from tests.fakes.discord_api.editing import Editing
from tests.fakes.discord_api.gateway import Gateway, Session, shard_of
from tests.fakes.discord_api.interactions import Interactions

__all__ = ["FakeDiscord"]

_MAX_CONTENT = 2000
MAX_UPLOAD = 10 * 1024 * 1024  # without server boosts


@dataclass
class _Failure:
    status: int
    code: int
    retry_after: float | None
    via: bool
    message: str | None


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Built by hand: web.json_response would add "; charset=utf-8" and discord.py would
    # then treat the body as text.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


class FakeDiscord:
    """Stand-in for discord.com: records what the bot sent, injects what users say.

    Args:
        token: the only bot token accepted (REST ``Authorization: Bot <token>`` and IDENTIFY).
        heartbeat_interval_ms: sent in HELLO.
        shards: the shard count ``GET /gateway/bot`` recommends.
        max_concurrency: session starts per ``identify_interval`` (``GET /gateway/bot``).
        identify_interval: seconds an IDENTIFY's bucket must wait after the last; sooner ones
            are answered with an invalid session (0: not enforced).
    """

    def __init__(
        self,
        *,
        token: str = "fake-discord-token",
        heartbeat_interval_ms: int = 41_250,
        shards: int = 1,
        max_concurrency: int = 1,
        identify_interval: float = 0.0,
    ) -> None:
        self.token = token
        self.shards = shards
        self.bot_id = p.snowflake()
        self.user_id = p.snowflake()
        self.guild_id = p.snowflake()
        self.channel_id = p.snowflake()
        self.thread_id = p.snowflake()
        self.dm_channel_id = p.snowflake()
        self.bot_user = p.user(self.bot_id, "talonbot", bot=True)
        self._users: dict[str, dict[str, Any]] = {
            self.bot_id: self.bot_user,
            self.user_id: p.user(self.user_id, "alice"),
        }
        self._channels: dict[str, dict[str, Any]] = {
            self.channel_id: p.text_channel(self.channel_id, self.guild_id, "general"),
            self.thread_id: p.thread_channel(
                self.thread_id, self.guild_id, self.channel_id, self.user_id, "a thread"
            ),
            self.dm_channel_id: p.dm_channel(self.dm_channel_id, self._users[self.user_id]),
        }
        self._guilds: dict[str, str] = {self.guild_id: self.channel_id}  # guild -> its text channel
        self._messages: dict[str, dict[str, Any]] = {}
        self._sent: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._attempts: dict[str, int] = defaultdict(int)
        self._typing: dict[str, int] = defaultdict(int)
        self._files: dict[str, tuple[bytes, str | None]] = {}
        self._downloads: dict[str, int] = defaultdict(int)
        self._failures: list[_Failure] = []
        self._delays: list[float] = []
        self.gateway = Gateway(
            token=token,
            heartbeat_interval_ms=heartbeat_interval_ms,
            ready_payloads=self._ready_payloads,
            new_session_id=lambda: f"session-{p.snowflake()}",
            max_concurrency=max_concurrency,
            identify_interval=identify_interval,
        )
        self.interactions = Interactions(
            app_id=self.bot_id,
            guild_id=self.guild_id,
            bot_user=self.bot_user,
            channels=self._channels,
            messages=self._messages,
            users=self._users,
            dispatch=self.gateway.broadcast,
            record_sent=lambda cid, message: self._sent[cid].append(message),
        )
        self.app_commands = AppCommands(app_id=self.bot_id)
        self._runner: web.AppRunner | None = None
        self._port = 0

    # ---------------------------------------------------------------- lifecycle

    def routes(self) -> list[web.RouteDef]:
        """Everything the fake answers: the gateway, REST, interactions, edits and deletes."""
        return [
            web.get("/gateway", self.gateway.handle),
            web.get("/api/v10/gateway", self._get_gateway),
            web.get("/api/v10/gateway/bot", self._get_gateway),
            web.get("/api/v10/users/@me", self._get_me),
            web.get("/api/v10/oauth2/applications/@me", self._get_application),
            web.get("/api/v10/channels/{cid}", self._get_channel),
            web.post("/api/v10/channels/{cid}/messages", self._create_message),
            web.post("/api/v10/channels/{cid}/typing", self._trigger_typing),
            web.get("/attachments/{aid}/{filename}", self._get_file),
            *self.interactions.routes(),
            *self.app_commands.routes(),
            *Editing(self.sent_records, self._messages).routes(),
        ]

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._auth], client_max_size=64 * 1024 * 1024)
        app.router.add_routes(self.routes())
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    # ---------------------------------------------------------------- test helpers

    def add_guild(self, shard: int, count: int) -> tuple[str, str]:
        """A guild the bot is in whose events go to shard ``shard`` of ``count``, with one
        text channel; returns (guild id, channel id). Sessions identified before see it once
        they identify again."""
        stamp = int(p.snowflake()) >> 22
        stamp += (shard - stamp) % count
        guild_id = str((stamp << 22) | (int(p.snowflake()) & 0x3FFFFF))
        channel_id = p.snowflake()
        self._channels[channel_id] = p.text_channel(channel_id, guild_id, "general")
        self._guilds[guild_id] = channel_id
        return guild_id, channel_id

    def inject_message(
        self,
        channel_id: str,
        content: str,
        *,
        author_id: str,
        guild: bool = True,
        mention_bot: bool = False,
        thread_id: str | None = None,
        reply_to: str | None = None,
        attachments: Iterable[dict[str, Any]] = (),
        author_bot: bool = False,
        flags: int = 0,
    ) -> str:
        """A user posts a message; dispatched as MESSAGE_CREATE. Returns the message id.

        ``thread_id`` posts inside that thread of ``channel_id`` (created on first use and,
        unlike :attr:`thread_id`, unknown to the client's cache). Unknown guild channels are
        created too. ``guild=False`` makes ``channel_id`` a DM channel with the author.
        ``flags`` are the message's (8192: a voice message, whose one attachment is OGG/Opus).
        """
        author = self._users.get(author_id) or p.user(author_id, f"user{author_id[-4:]}", bot=author_bot)
        guild_id = self._channels.get(channel_id, {}).get("guild_id", self.guild_id)
        self._users.setdefault(author_id, author)
        target = channel_id
        if guild:
            self._channels.setdefault(channel_id, p.text_channel(channel_id, self.guild_id, "new-channel"))
            if thread_id is not None:
                self._channels.setdefault(
                    thread_id, p.thread_channel(thread_id, self.guild_id, channel_id, author_id, "thread")
                )
                target = thread_id
        else:
            self._channels.setdefault(channel_id, p.dm_channel(channel_id, author))
        if mention_bot:
            content = f"<@{self.bot_id}> {content}"
        referenced = self._messages.get(reply_to) if reply_to else None
        message = p.message(
            message_id=p.snowflake(),
            channel_id=target,
            author=author,
            content=content,
            guild_id=guild_id if guild else None,
            mentions=[self.bot_user] if mention_bot else [],
            attachments=list(attachments),
            referenced=referenced,
        )
        message["flags"] = flags
        self._messages[message["id"]] = message
        self.gateway.broadcast("MESSAGE_CREATE", message)
        return message["id"]

    def redeliver(self, message_id: str) -> None:
        """Dispatch an injected message's MESSAGE_CREATE again, unchanged (same id)."""
        self.gateway.broadcast("MESSAGE_CREATE", self._messages[message_id])

    def replay_on_resume(self, message_id: str) -> None:
        """The next RESUME replays from this message's MESSAGE_CREATE on, although the
        client had already received it."""
        self.gateway.rewind("MESSAGE_CREATE", message_id)

    def inject_dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Dispatch any payload as-is (malformed ones included)."""
        self.gateway.broadcast(event, data)

    def inject_frame(self, text: str) -> None:
        """Send a raw websocket frame (e.g. one that is not JSON) to every connection."""
        self.gateway.send_raw(text)

    def add_file(
        self, filename: str, data: bytes, *, content_type: str | None = None, size: int | None = None
    ) -> dict[str, Any]:
        """Host a file; returns the attachment object to pass to :meth:`inject_message`.

        ``size`` overrides the declared size (to test a cap checked before downloading).
        """
        aid = p.snowflake()
        self._files[aid] = (data, content_type)
        url = f"{self.api_base_url}/attachments/{aid}/{filename}"
        return p.attachment(aid, filename, len(data) if size is None else size, url, content_type)

    def file_downloads(self, attachment: dict[str, Any]) -> int:
        return self._downloads.get(attachment["id"], 0)

    def sent_records(self, channel_id: str) -> list[dict[str, Any]]:
        """The live records of the bot's messages in a channel (edits change them in place)."""
        return self._sent[str(channel_id)]

    def visible(self, channel_id: str) -> list[dict[str, Any]]:
        """The bot's messages the channel still shows (deleted ones left out), as last edited."""
        return [m for m in self._sent.get(str(channel_id), []) if not m.get("deleted")]

    def sent(self, channel_id: str) -> list[dict[str, Any]]:
        """Messages the bot created in this channel (or thread), oldest first."""
        return list(self._sent.get(str(channel_id), []))

    def send_attempts(self, channel_id: str) -> int:
        """Every POST to this channel's messages, failed and retried ones included."""
        return self._attempts.get(str(channel_id), 0)

    def typing_count(self, channel_id: str) -> int:
        return self._typing.get(str(channel_id), 0)

    def fail_next_send(
        self,
        status: int,
        code: int = 0,
        retry_after: float | None = None,
        *,
        via: bool = True,
        message: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` message POSTs fail with this status.

        A 429 carries Discord's headers (``Via`` unless ``via=False``, ``Retry-After``,
        ``X-RateLimit-*``) and body ``{"message", "retry_after", "global"}``.
        """
        for _ in range(times):
            self._failures.append(_Failure(status, code, retry_after, via, message))

    def delay_next_send(self, seconds: float) -> None:
        """The next message is created at once but its response comes ``seconds`` later."""
        self._delays.append(seconds)

    async def wait_for_sent(self, channel_id: str, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        await self._wait(lambda: len(self._sent.get(str(channel_id), [])) >= n, timeout, f"{n} sent")
        return self.sent(channel_id)

    async def wait_for_typing(self, channel_id: str, n: int = 1, timeout: float = 5.0) -> None:
        await self._wait(lambda: self._typing.get(str(channel_id), 0) >= n, timeout, f"{n} typing")

    async def wait_for_ready(self, *, identifies: int = 1, resumes: int = 0, timeout: float = 5.0) -> None:
        """Until this many sessions were identified (READY sent) and resumed."""
        await self._wait(
            lambda: len(self.gateway.identifies) >= identifies and self.gateway.resumes >= resumes,
            timeout,
            f"{identifies} identify / {resumes} resume",
        )

    async def disconnect_all(self, code: int = 4000) -> None:
        """Drop every gateway connection (resumable close code by default)."""
        await self.gateway.disconnect_all(code)

    async def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            if loop.time() >= deadline:
                raise TimeoutError(f"fake discord: timed out waiting for {what}")
            await asyncio.sleep(0.01)

    # ---------------------------------------------------------------- gateway payloads

    def _ready_payloads(self, session: Session) -> list[tuple[str, dict[str, Any]]]:
        shard, count = session.shard
        guilds = [g for g in self._guilds if shard_of(g, count) == shard]
        ready = {
            "v": 10,
            "user": self.bot_user,
            "guilds": [{"id": g, "unavailable": True} for g in guilds],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": self.bot_id, "flags": 0},
            "private_channels": [],
            "relationships": [],
            "session_type": "normal",
            "shard": [shard, count],
            "_trace": ["fake-gateway"],
        }
        return [("READY", ready), *(("GUILD_CREATE", self._guild_payload(g)) for g in guilds)]

    def _guild_payload(self, guild_id: str) -> dict[str, Any]:
        threads = [self._channels[self.thread_id]] if guild_id == self.guild_id else []
        return p.guild(
            guild_id,
            owner_id=self.user_id,
            channels=[self._channels[self._guilds[guild_id]]],
            threads=threads,
            bot_user=self.bot_user,
        )

    # ---------------------------------------------------------------- REST

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        public = (
            request.path in ("/gateway", "/api/v10/gateway")
            or request.path.startswith("/attachments/")
            or Interactions.is_public(request.path)
        )
        if not public and request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return _json({"message": "404: Not Found", "code": 0}, status=404)
        except web.HTTPMethodNotAllowed:
            return _json({"message": "405: Method Not Allowed", "code": 0}, status=405)

    async def _get_gateway(self, request: web.Request) -> web.Response:
        data: dict[str, Any] = {"url": self.gateway_url}
        if request.path.endswith("/bot"):
            data |= {
                "shards": self.shards,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 86_400_000,
                    "max_concurrency": self.gateway.max_concurrency,
                },
            }
        return _json(data)

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json(self.bot_user)

    async def _get_application(self, request: web.Request) -> web.Response:
        return _json(p.application(self.bot_id, self._users[self.user_id]))

    async def _get_channel(self, request: web.Request) -> web.Response:
        channel = self._channels.get(request.match_info["cid"])
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        return _json(channel)

    async def _trigger_typing(self, request: web.Request) -> web.Response:
        cid = request.match_info["cid"]
        if cid not in self._channels:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        self._typing[cid] += 1
        return web.Response(status=204)

    async def _get_file(self, request: web.Request) -> web.Response:
        entry = self._files.get(request.match_info["aid"])
        if entry is None:
            return web.Response(status=404, text="not found")
        self._downloads[request.match_info["aid"]] += 1
        data, content_type = entry
        return web.Response(body=data, content_type=content_type or "application/octet-stream")

    async def _read_body(self, request: web.Request) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """JSON body, or multipart with ``payload_json`` plus ``files[n]`` parts."""
        if request.content_type == "application/json":
            return await request.json(), []
        payload: dict[str, Any] = {}
        files: list[dict[str, Any]] = []
        reader = await request.multipart()
        async for part in reader:
            if part.name == "payload_json":
                payload = json.loads(await part.text())  # type: ignore[union-attr]
            else:
                data = await part.read()  # type: ignore[union-attr]
                files.append(
                    {
                        "field": part.name,
                        "filename": part.filename,
                        "size": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(),
                    }
                )
        return payload, files

    async def _create_message(self, request: web.Request) -> web.Response:
        cid = request.match_info["cid"]
        self._attempts[cid] += 1
        try:
            body, files = await self._read_body(request)
        except Exception:  # not JSON, not multipart: Discord answers 400 as well
            return _json({"message": "The request body contains invalid JSON.", "code": 50109}, status=400)
        if self._failures:
            return self._failure_response(self._failures.pop(0))
        channel = self._channels.get(cid)
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        content = body.get("content") or ""
        if len(content) > _MAX_CONTENT:
            return _json(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {
                        "content": {
                            "_errors": [
                                {
                                    "code": "BASE_TYPE_MAX_LENGTH",
                                    "message": f"Must be {_MAX_CONTENT} or fewer in length.",
                                }
                            ]
                        }
                    },
                },
                status=400,
            )
        if sum(f["size"] for f in files) > MAX_UPLOAD:
            return _json({"message": "Request entity too large", "code": 40005}, status=413)
        if not content and not files and not body.get("embeds"):
            return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
        nonce = body.get("nonce")
        if nonce is not None and body.get("enforce_nonce"):
            for existing in self._sent[cid]:
                if existing.get("nonce") == str(nonce):
                    return _json(existing)  # Discord answers a repeated nonce with the first message
        ref = body.get("message_reference")
        referenced = self._messages.get(str(ref["message_id"])) if ref else None
        message = p.message(
            message_id=p.snowflake(),
            channel_id=cid,
            author=self.bot_user,
            content=content,
            guild_id=channel.get("guild_id"),
            referenced=referenced,
            nonce=None if nonce is None else str(nonce),
            attachments=[
                p.attachment(p.snowflake(), str(f["filename"]), int(f["size"]), "", None) for f in files
            ],
        )
        message["components"] = list(body.get("components") or [])
        record = {**message, "allowed_mentions": body.get("allowed_mentions"), "files": files}
        self._messages[message["id"]] = message
        self._sent[cid].append(record)
        if self._delays:
            await asyncio.sleep(self._delays.pop(0))
        return _json(message, headers=self._ratelimit_headers(remaining=4, reset_after=1.0))

    def _failure_response(self, failure: _Failure) -> web.Response:
        if failure.status == 429:
            retry_after = failure.retry_after if failure.retry_after is not None else 1.0
            headers = self._ratelimit_headers(remaining=0, reset_after=retry_after)
            headers["Retry-After"] = str(math.ceil(retry_after))
            headers["X-RateLimit-Scope"] = "user"
            if failure.via:
                headers["Via"] = "1.1 google"
            body = {
                "message": failure.message or "You are being rate limited.",
                "retry_after": retry_after,
                "global": False,
                "code": failure.code,
            }
            return _json(body, status=429, headers=headers)
        default = {400: "400: Bad Request", 403: "Missing Permissions", 404: "Unknown Channel"}
        message = failure.message or default.get(failure.status, f"{failure.status}: Error")
        return _json({"message": message, "code": failure.code}, status=failure.status)

    @staticmethod
    def _ratelimit_headers(*, remaining: int, reset_after: float) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": "fake-messages-bucket",
        }
