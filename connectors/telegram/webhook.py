"""Receiving updates by webhook: a small aiohttp server Telegram posts to.

A request is answered 200 only after the update was committed; any other answer makes
Telegram deliver it again.
"""

from __future__ import annotations

import hmac
import logging
import re
from typing import Any

from aiohttp import web

from connectors.telegram.polling import UpdateHandler
from gateway.jsonsafe import JSONInputError, loads

log = logging.getLogger("talon.connectors.telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
# An update is a few kilobytes; a larger body is answered 413 before it is read.
MAX_BODY = 1024 * 1024


def secret_problem(secret: str | None) -> str | None:
    """Why ``secret`` cannot be a Telegram webhook secret, or None when it can."""
    if not secret:
        return "webhook_url is set but webhook_secret is empty"
    if not _SECRET_CHARS.match(secret):
        return "webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -"
    return None


class WebhookServer:
    """Listens on ``host:port`` for ``POST path`` and passes verified updates to ``handle``.

    Args:
        name: the channel name (for logs).
        host: the address to bind.
        port: the port to bind.
        path: the URL path Telegram posts to.
        secret: the value Telegram must send in ``X-Telegram-Bot-Api-Secret-Token``.
        handle: processes one raw update; raising answers 500 so Telegram retries.
    """

    def __init__(
        self, *, name: str, host: str, port: int, path: str, secret: str, handle: UpdateHandler
    ) -> None:
        self._name = name
        self._host = host
        self._port = port
        self._path = path or "/"
        self._secret = secret.encode()
        self._handle = handle
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind and serve; raises ``OSError`` when the address is unavailable."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self._path, self._on_update)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _on_update(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning(
                "%s: refused a webhook request without the right secret from %s", self._name, request.remote
            )
            return web.Response(status=403, text="forbidden")
        try:
            raw: Any = loads(await request.read(), max_bytes=MAX_BODY)
        except JSONInputError as exc:
            return web.Response(status=400, text=f"body must be JSON: {exc}")
        if not isinstance(raw, dict):
            return web.Response(status=400, text="body must be a JSON object")
        try:
            await self._handle(raw)
        except Exception:
            log.exception(
                "%s: intake failed for update %s; Telegram will deliver it again",
                self._name,
                raw.get("update_id"),
            )
            return web.Response(status=500, text="not committed")
        return web.Response(status=200)
