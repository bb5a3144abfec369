"""The fake Bot API as a process of its own, slow and sometimes failing, for tests that run
``talon run`` as users do.

    python -m tests.fakes.telegram_api.standalone --port-file PATH \\
        [--latency 0.05:0.2] [--fail-rate 0.02] [--fail-first 3] [--port 0] [--seed 1] [--max-seconds 600]

Every Bot API call waits a random time in ``--latency`` before it is answered. A share
``--fail-rate`` of ``sendMessage``, ``sendDocument`` and ``sendPhoto`` calls is refused before
anything is recorded, as Telegram refuses them: half with 429 flood control (``retry_after`` 1 s), half with
502 Bad Gateway. ``--fail-first N`` answers the first N Bot API calls of any method with 502, as
a server that is still coming up does. The test drives the fake over HTTP under ``/_fake/``:

- ``POST /_fake/inject`` ``{"messages": [{"chat_id", "text", "user_id", "chat_type"?, "voice_b64"?, "photo_b64"?,
  "media_group_id"?}]}``
  queues incoming messages; answers ``{"update_ids": [...]}``.
- ``POST /_fake/chats`` ``{"chat_id", "chat_type"?}`` makes a chat known without a message (a
  group the bot was added to), so the gateway can post there first.
- ``GET /_fake/sent`` answers ``{"<chat_id>": ["text", ...]}``: every delivered message.
- ``GET /_fake/messages`` answers ``{"<chat_id>": [{"message_id", "text", "edits", "versions",
  "deleted"}, ...]}``: every bot message as it is now, with the texts its edits replaced.
- ``GET /_fake/files`` answers ``[{"chat_id", "method", "name", "size", "sha256"}, ...]``: every
  uploaded file, in order.
- ``GET /_fake/stats`` answers call counts per method, refusals, pending updates and the
  webhook's answers by HTTP status (-1: no answer).
- ``POST /_fake/tap`` ``{"chat_id", "message_id", "label", "user_id"}`` taps an inline button;
  answers ``{"query_id"}``. ``GET /_fake/callbacks`` answers ``{"buttons": {"<chat>:<message>":
  [label, ...]}, "answers": {"<query_id>": text}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import signal
from collections import Counter
from pathlib import Path

from aiohttp import web

from tests.fakes.telegram_api.server import FakeTelegramAPI, _error_response
from tests.fakes.telegram_api.state import ApiError

_REFUSABLE = frozenset({"sendmessage", "senddocument", "sendphoto"})


class ChaoticTelegramAPI(FakeTelegramAPI):
    """The fake server with latency on every call and refusals on some sends."""

    def __init__(
        self, *, latency: tuple[float, float], fail_rate: float, seed: int, fail_first: int = 0
    ) -> None:
        super().__init__()
        self.latency = latency
        self.fail_rate = fail_rate
        self.fail_first = fail_first
        self.refused: Counter[int] = Counter()
        self.method_calls: Counter[str] = Counter()
        self._rng = random.Random(seed)

    async def _on_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"].lower()
        self.method_calls[method] += 1
        if self.fail_first > 0:
            self.fail_first -= 1
            self.refused[502] += 1
            return _error_response(ApiError(502, "Bad Gateway"))
        if method != "getupdates":
            await asyncio.sleep(self._rng.uniform(*self.latency))
        if method in _REFUSABLE and self._rng.random() < self.fail_rate:
            if self._rng.random() < 0.5:
                self.refused[429] += 1
                return _error_response(ApiError(429, "Too Many Requests: retry after 1", {"retry_after": 1}))
            self.refused[502] += 1
            return _error_response(ApiError(502, "Bad Gateway"))
        return await super()._on_api(request)

    def calls_recorded(self) -> None:
        # The base class keeps every call's parameters for in-process tests; a burst of
        # thousands needs only the counters above.
        self.calls.clear()
        self.call_times.clear()


def control_routes(fake: ChaoticTelegramAPI) -> list[web.RouteDef]:
    async def inject(request: web.Request) -> web.Response:
        body = await request.json()
        ids = [
            fake.inject_message(
                int(m["chat_id"]),
                str(m["text"]),
                user_id=int(m["user_id"]),
                chat_type=str(m.get("chat_type", "private")),
                voice=base64.b64decode(m["voice_b64"]) if "voice_b64" in m else None,
                photo=base64.b64decode(m["photo_b64"]) if "photo_b64" in m else None,
                media_group_id=m.get("media_group_id"),
            )
            for m in body["messages"]
        ]
        return web.json_response({"update_ids": ids})

    async def sent(request: web.Request) -> web.Response:
        return web.json_response(
            {str(chat): [m.text for m in fake.sent_messages(chat)] for chat in list(fake._sent)}
        )

    async def messages(request: web.Request) -> web.Response:
        return web.json_response(
            {
                str(chat): [
                    {
                        "message_id": m.message_id,
                        "text": m.text,
                        "edits": m.edits,
                        "versions": m.versions,
                        "deleted": m.deleted,
                    }
                    for m in fake.sent_messages(chat)
                ]
                for chat in list(fake._sent)
            }
        )

    async def files(request: web.Request) -> web.Response:
        return web.json_response(
            [
                {
                    "chat_id": str(f.chat_id),
                    "method": f.method,
                    "name": f.name,
                    "size": f.size,
                    "sha256": f.sha256,
                }
                for f in fake.received_files
            ]
        )

    async def stats(request: web.Request) -> web.Response:
        fake.calls_recorded()
        return web.json_response(
            {
                "calls": dict(fake.method_calls),
                "refused": {str(k): v for k, v in fake.refused.items()},
                "pending_updates": len(fake.pending_update_ids()),
                "webhook_answers": {
                    str(k): n for k, n in Counter(s for _, s in fake.webhook_attempts).items()
                },
            }
        )

    async def chats(request: web.Request) -> web.Response:
        body = await request.json()
        fake.add_chat(int(body["chat_id"]), str(body.get("chat_type", "group")))
        return web.json_response({"ok": True})

    async def tap(request: web.Request) -> web.Response:
        body = await request.json()
        query_id = fake.callbacks.tap(
            int(body["chat_id"]), int(body["message_id"]), str(body["label"]), user_id=int(body["user_id"])
        )
        return web.json_response({"query_id": query_id})

    async def callbacks(request: web.Request) -> web.Response:
        buttons = {
            f"{c}:{m}": [b["text"] for b in fake.callbacks.buttons(c, m)] for c, m in fake.callbacks.markups
        }
        answers = {q: a.get("text") for q, a in fake.callbacks.answers.items()}
        return web.json_response({"buttons": buttons, "answers": answers})

    async def hang(request: web.Request) -> web.Response:
        body = await request.json()
        fake.hang_next(str(body["method"]), deliver=bool(body.get("deliver")))
        return web.json_response({})

    return [
        web.post("/_fake/hang", hang),
        web.post("/_fake/tap", tap),
        web.post("/_fake/chats", chats),
        web.get("/_fake/callbacks", callbacks),
        web.post("/_fake/inject", inject),
        web.get("/_fake/sent", sent),
        web.get("/_fake/files", files),
        web.get("/_fake/messages", messages),
        web.get("/_fake/stats", stats),
    ]


async def serve(args: argparse.Namespace) -> None:
    low, _, high = args.latency.partition(":")
    fake = ChaoticTelegramAPI(
        latency=(float(low), float(high or low)),
        fail_rate=args.fail_rate,
        seed=args.seed,
        fail_first=args.fail_first,
    )
    for chat_id in args.known_chat:
        fake.add_chat(chat_id)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_routes(control_routes(fake))
    app.router.add_route("*", "/bot{token}/{method}", fake._on_api)
    app.router.add_get("/file/bot{token}/{path:.+}", fake._on_file)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}"
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": fake.url, "token": fake.token}))
    os.replace(tmp, args.port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    trim = asyncio.create_task(_trim_call_log(fake))
    try:
        await asyncio.wait_for(stop.wait(), args.max_seconds)
    except TimeoutError:
        pass
    finally:
        trim.cancel()
        fake._closing.set()
        fake._wake()
        await runner.cleanup()


async def _trim_call_log(fake: ChaoticTelegramAPI) -> None:
    while True:
        await asyncio.sleep(1.0)
        fake.calls_recorded()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True, help="written with url and token")
    parser.add_argument("--latency", default="0:0", help="seconds added to each call, LOW:HIGH")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of sends and uploads refused")
    parser.add_argument("--fail-first", type=int, default=0, help="Bot API calls answered 502 first")
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1; 0 = any free one")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--known-chat", type=int, action="append", default=[], help="a private chat the bot has seen before"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
