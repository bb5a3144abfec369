"""One rendered chunk -> one Discord message, with failures classified for the outbox.

Rate limits: discord.py handles a 429 that carries ``Via`` (Discord's do) by sleeping
``retry_after`` and resending, and waits on its own when a bucket is exhausted. A 429 means
Discord created nothing, so that resend cannot duplicate; the chunk is retried after the
given time inside :meth:`DiscordSender.send`. Waits longer than ``max_ratelimit_timeout``
(30 s, the minimum discord.py allows) are not slept: :class:`discord.RateLimited` becomes
``TRANSIENT`` with ``retry_after`` and the outbox retries later. So does a 429 without
``Via`` (a Cloudflare block) or one that outlasts discord.py's five tries.

Duplicates: every chunk carries a nonce derived from its delivery id and text, with
``enforce_nonce`` (discord.py sets it). Discord answers a repeated nonce from the same bot
within a few minutes with the message it already created, so a prompt resend of the same
delivery after an ``AMBIGUOUS`` timeout, or discord.py's own resend after a 5xx, does not
post twice.

Timeouts: when ``send_timeout`` expires with a request on the wire (headers sent, no answer)
the result is ``AMBIGUOUS``; while still waiting before any request left (a rate-limit
sleep, connecting) it is ``TRANSIENT``.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import discord

from connectors.base import ErrorClass, OutboundChunk, OutboundFile, SendResult
from connectors.discord_bot.inbound import RecentIds

log = logging.getLogger("talon.connectors.discord")


@dataclass(slots=True)
class _Wire:
    """What happened on the wire during one send."""

    unanswered: int = 0  # requests whose headers left without a response
    last_status: int | None = None


_wire: ContextVar[_Wire | None] = ContextVar("talon_discord_wire", default=None)


def request_trace() -> aiohttp.TraceConfig:
    """aiohttp hooks recording, for the send running in this task, whether a request left."""
    trace = aiohttp.TraceConfig()

    async def headers_sent(session: Any, ctx: Any, params: Any) -> None:
        wire = _wire.get()
        if wire is not None:
            wire.unanswered += 1

    async def answered(session: Any, ctx: Any, params: aiohttp.TraceRequestEndParams) -> None:
        wire = _wire.get()
        if wire is not None:
            wire.unanswered = max(0, wire.unanswered - 1)
            wire.last_status = params.response.status

    trace.on_request_headers_sent.append(headers_sent)
    trace.on_request_end.append(answered)
    # on_request_exception leaves the request counted as unanswered: it may have landed
    return trace


def nonce_for(item: OutboundChunk | OutboundFile) -> str:
    """25 characters (Discord's limit), stable across retries of the same delivery."""
    what = item.chunk.text if isinstance(item, OutboundChunk) else f"file:{item.name}"
    digest = hashlib.sha256(f"{item.delivery_id}:{what}".encode()).hexdigest()
    return "t" + digest[:24]


def classify_http_error(exc: discord.HTTPException) -> SendResult:
    status = exc.status
    detail = f"discord: {exc}"
    if status == 429:
        return SendResult.failed(ErrorClass.TRANSIENT, detail, retry_after=_retry_after(exc))
    if status >= 500 or status == 408:
        return SendResult.failed(ErrorClass.TRANSIENT, detail)
    return SendResult.failed(ErrorClass.PERMANENT, detail)


def _retry_after(exc: discord.HTTPException) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        try:
            return max(0.0, float(headers[name]))
        except (KeyError, TypeError, ValueError):
            continue
    return 5.0


class DiscordSender:
    """Delivers chunks through a logged-in client.

    Args:
        client: the connector's client (created with :func:`request_trace` as ``http_trace``).
        send_timeout: seconds one send may take, rate-limit waits included.
        sent_ids: receives the id of every message sent (replies to them address the bot).
        dm_chats: DM channel ids; chunks there are not sent as replies.
    """

    def __init__(
        self, client: discord.Client, *, send_timeout: float, sent_ids: RecentIds, dm_chats: set[str]
    ) -> None:
        self._client = client
        self._timeout = send_timeout
        self._sent_ids = sent_ids
        self._dm_chats = dm_chats

    async def send(self, item: OutboundChunk) -> SendResult:
        try:
            target = int(item.thread.topic or item.thread.chat_id)
        except ValueError:
            return SendResult.failed(ErrorClass.PERMANENT, f"discord: not a channel id: {item.thread}")
        kwargs: dict[str, Any] = {
            "allowed_mentions": discord.AllowedMentions.none(),
            "nonce": nonce_for(item),
        }
        reference = self._reference(item, target)
        if reference is not None:
            kwargs["reference"] = reference
        channel = self._client.get_partial_messageable(target)
        return await self._deliver(target, lambda: channel.send(item.chunk.text, **kwargs))

    async def send_file(self, item: OutboundFile) -> SendResult:
        """Upload one file as a message's attachment (multipart), with a nonce like chunks."""
        try:
            target = int(item.thread.topic or item.thread.chat_id)
        except ValueError:
            return SendResult.failed(ErrorClass.PERMANENT, f"discord: not a channel id: {item.thread}")
        data = await asyncio.to_thread(Path(item.path).read_bytes)
        kwargs: dict[str, Any] = {
            "allowed_mentions": discord.AllowedMentions.none(),
            "nonce": nonce_for(item),
        }
        reference = self._reference(item, target)
        if reference is not None:
            kwargs["reference"] = reference
        channel = self._client.get_partial_messageable(target)
        # discord.py rewinds the File itself when it retries a 5xx.
        return await self._deliver(
            target, lambda: channel.send(file=discord.File(io.BytesIO(data), filename=item.name), **kwargs)
        )

    async def _deliver(self, target: int, post: Callable[[], Awaitable[discord.Message]]) -> SendResult:
        """Run one create-message call within the send timeout and classify how it ended."""
        wire = _Wire()
        token = _wire.set(wire)
        try:
            async with asyncio.timeout(self._timeout):
                message = await post()
        except TimeoutError:
            if wire.unanswered or wire.last_status not in (None, 429):
                return SendResult.failed(
                    ErrorClass.AMBIGUOUS,
                    f"discord: no answer within {self._timeout:g} s; it may have been sent",
                )
            return SendResult.failed(ErrorClass.TRANSIENT, f"discord: not sent within {self._timeout:g} s")
        except discord.RateLimited as exc:
            return SendResult.failed(
                ErrorClass.TRANSIENT, f"discord: rate limited for {exc.retry_after:.1f} s", exc.retry_after
            )
        except discord.HTTPException as exc:
            return classify_http_error(exc)
        except aiohttp.ClientConnectorError as exc:
            return SendResult.failed(ErrorClass.TRANSIENT, f"discord: cannot connect: {exc}")
        except (aiohttp.ClientError, OSError) as exc:
            error = ErrorClass.AMBIGUOUS if wire.unanswered else ErrorClass.TRANSIENT
            return SendResult.failed(error, f"discord: connection failed: {exc!r}")
        except Exception as exc:
            log.exception("unexpected error sending to discord channel %s", target)
            error = ErrorClass.AMBIGUOUS if wire.unanswered else ErrorClass.TRANSIENT
            return SendResult.failed(error, f"discord: {exc!r}")
        finally:
            _wire.reset(token)
        self._sent_ids.add(str(message.id))
        return SendResult.sent(str(message.id))

    def _reference(self, item: OutboundChunk | OutboundFile, target: int) -> discord.MessageReference | None:
        if not item.reply_to or item.thread.chat_id in self._dm_chats:
            return None
        try:
            message_id = int(item.reply_to)
        except ValueError:
            return None
        return discord.MessageReference(message_id=message_id, channel_id=target, fail_if_not_exists=False)
