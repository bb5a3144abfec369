"""The fake Slack as a process of its own, slow and sometimes refusing, for tests that run
``talon run`` as users do.

    python -m tests.fakes.slack_api.standalone --port-file PATH \\
        [--latency 0.05:0.2] [--fail-rate 0.02] [--redeliver-after 0] [--spread] [--events-url URL] \\
        [--seed 1] [--max-seconds 600]

Every Web API call, and every POST of a file's bytes to its upload URL, waits a random
time in ``--latency`` before it is answered. A share ``--fail-rate`` of the calls that post
or share (``chat.postMessage``, ``files.getUploadURLExternal``, the bytes' POST,
``files.completeUploadExternal``) is refused before anything is done, the two ways Slack
refuses a call it did not carry out: half with HTTP 429 ``ratelimited`` (``Retry-After:
1``), half with HTTP 503 ``service_unavailable``. A shared file's
``files.completeUploadExternal`` answer comes another ``--latency`` after the file showed
in the channel. (Slack's other 5xx and ``internal_error``
may have posted; the connector treats them as ambiguous and never resends, so a test
asserting that nothing is lost must not inject them.)

Events go out over Socket Mode, or with ``--events-url URL`` as signed HTTP requests to that
Request URL (an answer other than 200, or none, leaves an event unacknowledged). With
``--redeliver-after S`` an envelope the app has not acknowledged within S seconds is
delivered again, up to three times, as Slack does. With ``--spread`` envelopes go to the open
connections in turn, as Slack spreads them over the connections of several nodes; without
it, to the newest connection.

The test drives the fake over HTTP under ``/_fake/``:

- ``POST /_fake/inject`` ``{"messages": [{"channel", "text", "user"?}]}`` delivers user
  messages as ``message`` events, in order (``D...`` channels are DMs); answers ``{"ts": [...]}``.
- ``GET /_fake/sent`` answers ``{"<channel>": ["text", ...]}``: the bot's messages each channel
  still shows (deleted ones left out), as last edited.
- ``GET /_fake/files`` answers ``[{"chat_id", "name", "size", "sha256"}, ...]``: every file
  shared into a channel, in order. A file shows in a channel only once
  ``files.completeUploadExternal`` shared it; bytes uploaded but never shared are not listed.
- ``GET /_fake/stats`` answers call counts per method, refusals (per status and per
  method, ``upload`` for the bytes' POST), deliveries and acks.

The port file holds ``{"url", "bot_token", "app_token"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import aiohttp
from aiohttp import web

from tests.fakes.slack_api.model import Envelope, channel_type
from tests.fakes.slack_api.server import FakeSlack

_MAX_REDELIVERIES = 3  # Slack retries an unacknowledged event three times
# The calls that post or share something; the chaos refuses a share of them.
_REFUSABLE = frozenset({"chat.postMessage", "files.getUploadURLExternal", "files.completeUploadExternal"})


class ChaoticSlack(FakeSlack):
    """The fake Slack with latency on every Web API call and upload, refusals on some posts
    and upload steps."""

    def __init__(
        self, *, latency: tuple[float, float], fail_rate: float, seed: int, redeliver_after: float
    ) -> None:
        super().__init__()
        self.latency = latency
        self.fail_rate = fail_rate
        self.redeliver_after = redeliver_after
        self.refused: Counter[int] = Counter()
        self.refused_calls: Counter[str] = Counter()  # per method; the bytes' POST as "upload"
        self.method_calls: Counter[str] = Counter()
        self.redelivered = 0
        self._sent_at: dict[str, float] = {}
        # Refusals draw from their own sequence: which posts are refused depends only on the
        # seed and their order, not on how many other calls happened in between.
        self._latency_rng = random.Random(seed)
        self._refusal_rng = random.Random(seed)

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.method_calls[method] += 1
        await asyncio.sleep(self._latency_rng.uniform(*self.latency))
        if method in _REFUSABLE and self._refusal_rng.random() < self.fail_rate:
            await request.read()  # as Slack does: the client sent it all, then hears the refusal
            return self._refusal(method)
        response = await super()._api(request)
        if method == "files.completeUploadExternal":
            # The file is in the channel now; the answer still has to travel back, and a
            # crash meanwhile leaves the app not knowing.
            await asyncio.sleep(self._latency_rng.uniform(*self.latency))
        return response

    async def _receive_upload(self, request: web.Request) -> web.Response:
        self.method_calls["upload"] += 1
        await asyncio.sleep(self._latency_rng.uniform(*self.latency))
        if self._refusal_rng.random() < self.fail_rate:
            await request.read()
            return self._refusal("upload")
        return await super()._receive_upload(request)

    def _refusal(self, method: str) -> web.Response:
        self.refused_calls[method] += 1
        if self._refusal_rng.random() < 0.5:
            self.refused[429] += 1
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"}
            )
        self.refused[503] += 1
        return web.json_response({"ok": False, "error": "service_unavailable"}, status=503)

    async def _send(self, envelope: Envelope) -> None:
        await super()._send(envelope)
        if envelope.attempts:
            self._sent_at[envelope.envelope_id] = time.monotonic()

    async def redeliver_overdue(self) -> None:
        """Send again every envelope left unacknowledged for ``redeliver_after`` seconds."""
        now = time.monotonic()
        for envelope in self.unacked():
            sent_at = self._sent_at.get(envelope.envelope_id, now)
            if envelope.attempts <= _MAX_REDELIVERIES and now - sent_at >= self.redeliver_after:
                self.redelivered += 1
                await self._send(envelope)

    def forget_calls(self) -> None:
        # The base class keeps every call's parameters for in-process tests; a burst needs
        # only the counters above.
        self.state.calls.clear()
        self.state.call_times.clear()


def control_routes(fake: ChaoticSlack) -> list[web.RouteDef]:
    async def inject(request: web.Request) -> web.Response:
        body = await request.json()
        stamps = []
        for m in body["messages"]:
            channel = str(m["channel"])
            stamps.append(
                await fake.inject_message(
                    channel,
                    str(m["text"]),
                    user=str(m.get("user", "U0HUMAN01")),
                    channel_type=channel_type(channel),
                )
            )
        return web.json_response({"ts": stamps})

    async def sent(request: web.Request) -> web.Response:
        return web.json_response(
            {
                channel: [p.text for p in posts if not p.deleted]
                for channel, posts in list(fake.state.posted.items())
            }
        )

    async def files(request: web.Request) -> web.Response:
        return web.json_response(
            [
                {"chat_id": f.channel, "name": f.name, "size": f.size, "sha256": f.sha256}
                for f in list(fake.shared_files)
            ]
        )

    async def stats(request: web.Request) -> web.Response:
        envelopes = fake.envelopes
        return web.json_response(
            {
                "calls": dict(fake.method_calls),
                "refused": {str(k): v for k, v in fake.refused.items()},
                "refused_calls": dict(fake.refused_calls),
                "envelopes": len(envelopes),
                "unacked": len(fake.unacked()),
                "unacked_attempts": [e.attempts for e in fake.unacked()][:20],
                "redelivered": fake.redelivered,
                "connections": fake.connections,
            }
        )

    return [
        web.post("/_fake/inject", inject),
        web.get("/_fake/sent", sent),
        web.get("/_fake/files", files),
        web.get("/_fake/stats", stats),
    ]


async def serve(args: argparse.Namespace) -> None:
    low, _, high = args.latency.partition(":")
    fake = ChaoticSlack(
        latency=(float(low), float(high or low)),
        fail_rate=args.fail_rate,
        seed=args.seed,
        redeliver_after=args.redeliver_after,
    )
    fake.spread = args.spread
    if args.events_url:
        fake.events_url = args.events_url
        fake._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))  # closed by __aexit__
    # The fake's own routes (as FakeSlack.__aenter__ lays them out) plus the control API.
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_routes(control_routes(fake))
    app.router.add_route("*", "/api/{method}", fake._api)
    app.router.add_post("/upload/v1/{file_id}", fake._receive_upload)
    app.router.add_get("/socket", fake._socket)
    app.router.add_get("/files-pri/{file_key}/download/{name}", fake._download)
    app.router.add_get("/files-pri/{file_key}/{name}", fake._download)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    fake._runner = runner  # cleaned up by FakeSlack.__aexit__
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.port = runner.addresses[0][1]
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(
        json.dumps({"url": fake.base_url, "bot_token": fake.bot_token, "app_token": fake.app_token})
    )
    os.replace(tmp, args.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    chores = asyncio.create_task(_housekeeping(fake))
    try:
        await asyncio.wait_for(stop.wait(), args.max_seconds)
    except TimeoutError:
        pass
    finally:
        chores.cancel()
        await fake.__aexit__(None, None, None)


async def _housekeeping(fake: ChaoticSlack) -> None:
    while True:
        await asyncio.sleep(0.5)
        fake.forget_calls()
        if fake.redeliver_after > 0:
            await fake.redeliver_overdue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True, help="written with url and tokens")
    parser.add_argument("--latency", default="0:0", help="seconds added to each Web API call, LOW:HIGH")
    parser.add_argument(
        "--fail-rate", type=float, default=0.0, help="share of posts and upload steps refused"
    )
    parser.add_argument(
        "--redeliver-after",
        type=float,
        default=0.0,
        help="seconds before an unacked event is resent; 0: never",
    )
    parser.add_argument("--spread", action="store_true", help="deliver over every open connection in turn")
    parser.add_argument("--events-url", help="deliver events as signed HTTP requests to this Request URL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
