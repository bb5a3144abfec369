"""The fake Discord as a process of its own, slow and sometimes refusing, for tests that run
``talon run`` as users do.

    python -m tests.fakes.discord_api.standalone --port-file PATH \\
        [--latency 0.05:0.2] [--fail-rate 0.02] [--seed 1] [--max-seconds 600]
        [--max-concurrency 1] [--identify-interval 5]

Every REST call waits a random time in ``--latency`` before it is answered (the gateway
websocket is not slowed). A share ``--fail-rate`` of message creates, those that carry
files included, is refused before anything is created (after the request was read whole,
as Discord does): half with 429 as Discord sends it (``Via``, ``Retry-After``,
``X-RateLimit-*`` headers and ``retry_after`` 1 s in the body; discord.py retries a 429
only when ``Via`` is there), a quarter each with 502 and 503. A create that carries files
is answered another ``--latency`` after its message was created.

The test drives the fake over HTTP under ``/_fake/``:

- ``POST /_fake/inject`` ``{"messages": [{"channel_id", "text", "author_id", "guild"?, "mention"?}]}``
  dispatches user messages as MESSAGE_CREATE, in order (``guild`` false, the default, makes
  the channel a DM with the author); answers ``{"message_ids": [...]}``.
- ``POST /_fake/guilds`` ``{"shard": 1, "of": 2}`` adds a guild whose events go to that shard,
  with one text channel; answers ``{"guild_id", "channel_id"}``. Messages injected into the
  channel (``guild`` true, ``mention`` true to address the bot) reach that shard's session.
- ``GET /_fake/sent`` answers ``{"<channel_id>": ["content", ...]}``: the bot's messages each
  channel still shows (deleted ones left out), as last edited.
- ``GET /_fake/files`` answers ``[{"chat_id", "name", "size", "sha256"}, ...]``: every file
  attached to a message the bot created, in order. A file reaches the channel with its
  message, so a refused create lists nothing, and a create that repeats a nonce Discord
  already saw (``enforce_nonce``) is answered with the first message and lists nothing new.
- ``GET /_fake/stats`` answers call counts per route, refusals (per status, and how many
  carried files), creates answered with an earlier message for their repeated nonce, and
  gateway sessions: ``identifies``, ``shards`` (each IDENTIFY's ``[id, count]``, null when
  unsharded), ``early_identifies`` (refused as too soon after their bucket's last) and
  ``resumes``.

The port file holds ``{"url", "gateway_url", "token"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import FakeDiscord, _Failure

_REFUSALS = (429, 429, 502, 503)  # drawn uniformly: half rate limits, half server errors


class ChaoticDiscord(FakeDiscord):
    """The fake Discord with latency on every REST call and refusals on some creates."""

    def __init__(
        self,
        *,
        latency: tuple[float, float],
        fail_rate: float,
        seed: int,
        max_concurrency: int = 1,
        identify_interval: float = 0.0,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency, identify_interval=identify_interval)
        self.latency = latency
        self.fail_rate = fail_rate
        self.refused: Counter[int] = Counter()
        self.refused_uploads = 0  # refused creates that carried files
        self.repeated_nonces = 0  # creates answered with the message an earlier one created
        self.route_calls: Counter[str] = Counter()
        # Refusals draw from their own sequence: which creates are refused depends only on
        # the seed and their order, not on how many other calls happened in between.
        self._latency_rng = random.Random(seed)
        self._refusal_rng = random.Random(seed)

    @web.middleware
    async def chaos(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Slows every REST call, then applies the fake's own token check."""
        if request.path.startswith("/_fake/"):
            return await handler(request)
        if request.path != "/gateway":
            route = request.match_info.route.resource
            self.route_calls[f"{request.method} {route.canonical if route else request.path}"] += 1
            await asyncio.sleep(self._latency_rng.uniform(*self.latency))
        return await self._auth(request, handler)

    async def _create_message(self, request: web.Request) -> web.Response:
        if self._refusal_rng.random() >= self.fail_rate:
            cid = request.match_info["cid"]
            created = len(self._sent[cid])
            response = await super()._create_message(request)
            self.repeated_nonces += response.status == 200 and len(self._sent[cid]) == created
            if request.content_type.startswith("multipart/"):
                # The files are in the channel now; the answer still has to travel back,
                # and a crash meanwhile leaves the bot not knowing.
                await asyncio.sleep(self._latency_rng.uniform(*self.latency))
            return response
        await request.read()
        self.refused_uploads += request.content_type.startswith("multipart/")
        self._attempts[request.match_info["cid"]] += 1
        status = self._refusal_rng.choice(_REFUSALS)
        self.refused[status] += 1
        return self._failure_response(_Failure(status, 0, 1.0, True, None))

    def sent_contents(self) -> dict[str, list[str]]:
        """What each channel still shows (deleted messages left out), as last edited."""
        return {cid: [m["content"] for m in self.visible(cid)] for cid in list(self._sent)}

    def sent_files(self) -> list[dict[str, Any]]:
        return [
            {"chat_id": cid, "name": f["filename"], "size": f["size"], "sha256": f["sha256"]}
            for cid, messages in list(self._sent.items())
            for m in messages
            for f in m["files"]
        ]


def control_routes(fake: ChaoticDiscord) -> list[web.RouteDef]:
    async def inject(request: web.Request) -> web.Response:
        body = await request.json()
        ids = [
            fake.inject_message(
                str(m["channel_id"]),
                str(m["text"]),
                author_id=str(m["author_id"]),
                guild=bool(m.get("guild", False)),
                mention_bot=bool(m.get("mention", False)),
            )
            for m in body["messages"]
        ]
        return web.json_response({"message_ids": ids})

    async def sent(request: web.Request) -> web.Response:
        return web.json_response(fake.sent_contents())

    async def guilds(request: web.Request) -> web.Response:
        body = await request.json()
        guild_id, channel_id = fake.add_guild(int(body["shard"]), int(body["of"]))
        return web.json_response({"guild_id": guild_id, "channel_id": channel_id})

    async def files(request: web.Request) -> web.Response:
        return web.json_response(fake.sent_files())

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "calls": dict(fake.route_calls),
                "refused": {str(k): v for k, v in fake.refused.items()},
                "refused_uploads": fake.refused_uploads,
                "repeated_nonces": fake.repeated_nonces,
                "identifies": len(fake.gateway.identifies),
                "shards": [identify.get("shard") for identify in fake.gateway.identifies],
                "early_identifies": fake.gateway.early_identifies,
                "resumes": fake.gateway.resumes,
            }
        )

    return [
        web.post("/_fake/inject", inject),
        web.post("/_fake/guilds", guilds),
        web.get("/_fake/sent", sent),
        web.get("/_fake/files", files),
        web.get("/_fake/stats", stats),
    ]


def _app(fake: ChaoticDiscord) -> web.Application:
    app = web.Application(middlewares=[fake.chaos], client_max_size=64 * 1024 * 1024)
    app.router.add_routes(control_routes(fake))
    app.router.add_routes(fake.routes())
    return app


async def serve(args: argparse.Namespace) -> None:
    low, _, high = args.latency.partition(":")
    fake = ChaoticDiscord(
        latency=(float(low), float(high or low)),
        fail_rate=args.fail_rate,
        seed=args.seed,
        max_concurrency=args.max_concurrency,
        identify_interval=args.identify_interval,
    )
    runner = web.AppRunner(_app(fake), handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    fake._runner = runner  # cleaned up by FakeDiscord.__aexit__
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake._port = runner.addresses[0][1]
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"url": fake.api_base_url, "gateway_url": fake.gateway_url, "token": fake.token})
    )
    os.replace(tmp, args.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), args.max_seconds)
    except TimeoutError:
        pass
    finally:
        await fake.__aexit__(None, None, None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--port-file", type=Path, required=True, help="written with url, gateway_url and token"
    )
    parser.add_argument("--latency", default="0:0", help="seconds added to each REST call, LOW:HIGH")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of message creates refused")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-concurrency", type=int, default=1, help="sessions started per interval")
    parser.add_argument(
        "--identify-interval", type=float, default=0.0, help="seconds between IDENTIFYs of a bucket; 0 = any"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
