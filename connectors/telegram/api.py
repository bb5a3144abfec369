"""The python-telegram-bot client as this connector uses it, and its tuning knobs."""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from telegram import Bot
from telegram.request import HTTPXRequest

from gateway.backoff import Backoff
from gateway.config import TelegramChannel

DEFAULT_API_ROOT = "https://api.telegram.org"
ALLOWED_UPDATES = ("message", "channel_post", "callback_query")
DEFAULT_BACKOFF = Backoff(base=1.0, max=60.0)


@dataclass(frozen=True, slots=True)
class TelegramTuning:
    """Timings the connector uses; the defaults suit production, tests shrink them.

    Args:
        backoff: delays after failed ``getUpdates`` calls and failed intakes (1 s doubling to 60 s);
            a rejected token waits ``backoff.max``.
        typing_delay: seconds a turn runs before the first ``typing`` action; a reply that
            comes sooner costs no chat action (one API call per turn, as many as the reply).
        typing_max: seconds after which a forgotten typing indicator stops by itself.
        connect_timeout: seconds to open a connection to the Bot API.
        read_timeout: seconds to wait for an answer (``getUpdates`` adds its long-poll time).
        write_timeout: seconds to send a request body.
        media_write_timeout: seconds to upload a file.
    """

    backoff: Backoff = DEFAULT_BACKOFF
    typing_delay: float = 0.5
    typing_max: float = 900.0
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    write_timeout: float = 20.0
    media_write_timeout: float = 60.0


class TelegramBot(Bot):
    """A :class:`telegram.Bot` that can also fetch updates as raw JSON.

    Parsing each update separately keeps one malformed update from failing the whole
    batch (``Bot.get_updates`` parses them all at once) and keeps the platform payload
    for :attr:`InboundEvent.raw`.
    """

    __slots__ = ()

    async def get_raw_updates(
        self, offset: int | None, timeout: int, allowed_updates: Sequence[str]
    ) -> list[dict[str, Any]]:
        """``getUpdates`` returning the update dicts as Telegram sent them."""
        data: dict[str, Any] = {"timeout": timeout, "allowed_updates": list(allowed_updates)}
        if offset is not None:
            data["offset"] = offset
        read_timeout = (self._request[0].read_timeout or 0) + timeout
        result = await self._post("getUpdates", data, read_timeout=read_timeout)
        if not isinstance(result, list):
            raise TypeError(f"getUpdates returned {type(result).__name__}, expected a list")
        return result

    async def close(self) -> None:
        """Close both HTTP connection pools, whether or not :meth:`initialize` ran."""
        await asyncio.gather(self._request[0].shutdown(), self._request[1].shutdown())


def api_root(settings: TelegramChannel) -> str:
    return (settings.api_base_url or DEFAULT_API_ROOT).rstrip("/")


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client (building one costs a noticeable
    fraction of a second of CPU; call this off the event loop the first time)."""
    return httpx.create_ssl_context()


def make_bot(settings: TelegramChannel, tuning: TelegramTuning, tls: ssl.SSLContext) -> TelegramBot:
    """A bot client with its own HTTP connection pools (one for polling, one for the rest)."""
    root = api_root(settings)

    def request(pool: int) -> HTTPXRequest:
        return HTTPXRequest(
            connection_pool_size=pool,
            connect_timeout=tuning.connect_timeout,
            read_timeout=tuning.read_timeout,
            write_timeout=tuning.write_timeout,
            media_write_timeout=tuning.media_write_timeout,
            pool_timeout=tuning.connect_timeout,
            httpx_kwargs={"verify": tls},
        )

    # Room for every paced send in flight, plus the typing actions and file downloads.
    pool = settings.pacing.max_in_flight + 8
    return TelegramBot(
        settings.token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        request=request(pool),
        get_updates_request=request(1),
    )


def redact(text: str, token: str) -> str:
    """``text`` with the bot token (which PTB puts in URLs and some errors) removed."""
    return text.replace(token, "<token>") if token else text


class _TokenRedactor(logging.Filter):
    """Removes bot tokens from the client libraries' log records: httpx logs every
    request URL at INFO, and Bot API URLs carry the token."""

    LOGGERS = ("httpx", "telegram.Bot")

    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.tokens:
            message = record.getMessage()
            clean = message
            for token in self.tokens:
                clean = clean.replace(token, "<token>")
            if clean != message:
                record.msg, record.args = clean, None
        return True


_redactor: _TokenRedactor | None = None


def hide_token_in_logs(token: str) -> None:
    """Keep ``token`` out of httpx's and PTB's log output from now on."""
    global _redactor
    if _redactor is None:
        _redactor = _TokenRedactor()
    if token:
        _redactor.tokens.add(token)
