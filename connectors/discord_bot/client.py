"""A :class:`discord.Client` bound to one Talon channel.

Endpoints: discord.py reads the API base from the class attribute ``discord.http.Route.BASE``
and the gateway from ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``; both are
process-wide. Instead of changing them, this client's own HTTP client rewrites the URLs of
its requests (``request``) and of its gateway connection (``ws_connect``), so every
connector keeps its own ``api_base_url``/``gateway_url`` and several Discord channels with
different endpoints can run in one process. Nothing global is modified.

Robustness: every gateway parser is wrapped so that a malformed dispatch is logged and
skipped instead of ending discord.py's receive loop (its parsers trust Discord's payloads).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route

log = logging.getLogger("talon.connectors.discord")

MessageHook = Callable[[discord.Message, dict[str, Any]], None]
StateHook = Callable[[str, str], None]
InteractionHook = Callable[[discord.Interaction, dict[str, Any]], None]
IdentifyHook = Callable[..., Awaitable[None]]  # (shard_id, *, initial) -> when it may IDENTIFY


def api_base_for(api_base_url: str | None) -> str | None:
    """``http://host:port`` (or ``.../api/v10``) -> the versioned REST base discord.py uses."""
    if not api_base_url:
        return None
    base = api_base_url.rstrip("/")
    return base if base.endswith("/api/v10") else f"{base}/api/v10"


class _RoutedHTTPClient(HTTPClient):
    """discord.py's HTTP client with this connector's REST base and gateway URL."""

    def __init__(self, *args: Any, api_base: str | None, gateway_url: str | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.api_base = api_base
        self.gateway_url = gateway_url

    async def request(self, route: Route, **kwargs: Any) -> Any:
        default = Route.BASE
        if self.api_base and route.url.startswith(default):
            route.url = self.api_base + route.url[len(default) :]
        return await super().request(route, **kwargs)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        default = str(DiscordWebSocket.DEFAULT_GATEWAY)
        if self.gateway_url and url.startswith(default):
            # keep discord.py's query (v, encoding, compress) on our URL
            url = str(yarl.URL(self.gateway_url).update_query(yarl.URL(url).query))
        return await super().ws_connect(url, compress=compress)


def default_intents() -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    return intents


class TalonDiscordClient(discord.Client):
    """Forwards messages and connection state to the connector, in gateway order.

    ``on_message(message, raw)`` is called synchronously, in the order the gateway
    delivered the messages, with the MESSAGE_CREATE payload as ``raw``.
    ``on_state(state, detail)`` receives ``"connected"`` / ``"reconnecting"``.
    ``on_interaction(interaction, raw)`` is called likewise for each INTERACTION_CREATE.

    Args:
        api_base: versioned REST base (see :func:`api_base_for`) or ``None`` for discord.com.
        gateway_url: websocket URL or ``None`` for Discord's gateway.
        http_trace: aiohttp trace hooks (used to tell whether a request left).
        max_ratelimit_timeout: rate-limit waits longer than this raise
            :class:`discord.RateLimited` instead of sleeping (discord.py enforces >= 30 s).
        shard: (shard id, shard count) this client's gateway session receives, or None for all.
        before_identify: awaited before each IDENTIFY instead of discord.py's own wait.
    """

    def __init__(
        self,
        *,
        on_message: MessageHook,
        on_state: StateHook,
        api_base: str | None = None,
        gateway_url: str | None = None,
        http_trace: aiohttp.TraceConfig | None = None,
        max_ratelimit_timeout: float | None = None,
        on_interaction: InteractionHook | None = None,
        shard: tuple[int, int] | None = None,
        before_identify: IdentifyHook | None = None,
    ) -> None:
        super().__init__(
            intents=default_intents(),
            chunk_guilds_at_startup=False,
            max_ratelimit_timeout=max_ratelimit_timeout,
            shard_id=shard[0] if shard else None,
            shard_count=shard[1] if shard else None,
        )
        self._before_identify = before_identify
        self.http = _RoutedHTTPClient(
            self.loop,
            api_base=api_base,
            gateway_url=gateway_url,
            http_trace=http_trace,
            max_ratelimit_timeout=max_ratelimit_timeout,
        )
        self._connection.http = self.http
        self._talon_on_message = on_message
        self._talon_on_state = on_state
        self._talon_on_interaction = on_interaction
        self._current_raw: dict[str, Any] | None = None
        self._guard_parsers()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        if self._before_identify is None:
            await super().before_identify_hook(shard_id, initial=initial)
        else:
            await self._before_identify(shard_id, initial=initial)

    def set_gateway_url(self, url: str) -> None:
        """Use ``url`` for the gateway (e.g. the one ``GET /gateway/bot`` returned)."""
        if isinstance(self.http, _RoutedHTTPClient):
            self.http.gateway_url = url

    def _guard_parsers(self) -> None:
        parsers = self._connection.parsers
        for event, parser in list(parsers.items()):
            parsers[event] = self._guarded(event, parser)

    def _guarded(self, event: str, parser: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(data: Any) -> None:
            kept = event in ("MESSAGE_CREATE", "INTERACTION_CREATE") and isinstance(data, dict)
            self._current_raw = data if kept else None
            try:
                parser(data)
            except Exception as exc:
                # the payload may hold user content: log its shape, not its text
                keys = sorted(data) if isinstance(data, dict) else type(data).__name__
                log.warning("skipped a malformed %s gateway event (%r; keys %s)", event, exc, keys)
            finally:
                self._current_raw = None

        return run

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        super().dispatch(event, *args, **kwargs)
        try:
            if event == "message" and args:
                self._talon_on_message(args[0], self._current_raw or {})
            elif event == "interaction" and args and self._talon_on_interaction is not None:
                self._talon_on_interaction(args[0], self._current_raw or {})
            elif event in ("connect", "resumed"):
                self._talon_on_state("connected", "")
            elif event == "disconnect":
                self._talon_on_state("reconnecting", "gateway connection lost; discord.py is reconnecting")
        except Exception:
            log.exception("discord %s event handler failed", event)
