"""A stand-in for an OpenAI-compatible images API on 127.0.0.1: ``POST /v1/images/generations``
(JSON) and ``POST /v1/images/edits`` (multipart) answer with small real PNGs, as ``b64_json`` or,
with ``form="url"``, as a URL it serves itself (``form="junk"``: base64 of text, not an image). ``delay`` slows every answer, ``fail_next``
makes the next calls answer an error status; every request is recorded.

In its own process (``python -m tests.fakes.images_api --port-file F``) it writes
``{"url", "base_url", "api_key"}`` to F and serves ``GET /_fake/requests`` (what it was asked).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from tests.fakes.png_maker import make_png

__all__ = ["FakeImagesAPI"]


class FakeImagesAPI:
    """The images endpoints; ``base_url`` ends in ``/v1`` as an openai provider's does."""

    def __init__(self, *, delay: float = 0.0, form: str = "b64_json") -> None:
        self.delay = delay
        self.form = form
        self.api_key = "sk-images-test"
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._failures: list[int] = []
        self._hosted: dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        self._failures.extend([status] * count)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/images/generations", self._generate),
            web.post("/v1/images/edits", self._edit),
            web.get("/files/{name}", self._file),
        ]

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _generate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(
            {"endpoint": "generations", "auth": request.headers.get("Authorization"), **body}
        )
        return await self._answer(str(body.get("prompt", "")))

    async def _edit(self, request: web.Request) -> web.Response:
        fields: dict[str, Any] = {
            "endpoint": "edits",
            "auth": request.headers.get("Authorization"),
            "images": [],
        }
        async for part in await request.multipart():
            data = await part.read()  # type: ignore[union-attr]
            if part.filename:  # type: ignore[union-attr]
                fields["images"].append({"name": part.filename, "size": len(data)})  # type: ignore[union-attr]
            else:
                fields[part.name or ""] = data.decode()  # type: ignore[union-attr]
        self.requests.append(fields)
        return await self._answer(str(fields.get("prompt", "")))

    async def _answer(self, prompt: str) -> web.Response:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self._failures:
            status = self._failures.pop(0)
            return web.json_response(
                {"error": {"message": "the images service is busy", "type": "server_error"}}, status=status
            )
        shade = sum(prompt.encode()) % 200
        png = make_png(16, 16, (shade, 80, 160))
        if self.form == "junk":  # base64 of something that is not an image
            return web.json_response({"created": int(time.time()), "data": [{"b64_json": "aGVsbG8="}]})
        if self.form == "url":
            name = f"img-{next(self._ids)}.png"
            self._hosted[name] = png
            item: dict[str, Any] = {"url": f"{self.url}/files/{name}"}
        else:
            item = {"b64_json": base64.b64encode(png).decode("ascii")}
        return web.json_response({"created": int(time.time()), "data": [item]})

    async def _file(self, request: web.Request) -> web.Response:
        data = self._hosted.get(request.match_info["name"])
        if data is None:
            raise web.HTTPNotFound()
        return web.Response(body=data, content_type="image/png")


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeImagesAPI(delay=args.latency, form=args.form)
    app = web.Application(client_max_size=64 * 1024 * 1024)

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(fake.requests)

    app.router.add_routes([*fake.routes(), web.get("/_fake/requests", requests)])
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": fake.url, "base_url": fake.base_url, "api_key": fake.api_key}))
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
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="an OpenAI-compatible images API stand-in on 127.0.0.1")
    parser.add_argument("--port-file", type=Path, required=True, help="written with url, base_url, api_key")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each answer")
    parser.add_argument("--form", choices=("b64_json", "url"), default="b64_json")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
