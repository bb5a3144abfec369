"""An OpenAI-compatible audio API on 127.0.0.1: ``POST /v1/audio/transcriptions`` and
``POST /v1/audio/speech``, in process (``async with FakeAudioAPI() as audio``) or as a process
of its own for deployed tests::

    python -m tests.fakes.audio_api --port-file PATH [--latency 0.05] [--max-seconds 600]

Transcription "hears" what :func:`tests.fakes.voice_maker.voice_note` wrote into the file's
comments (``TALON_SPOKEN=...``), else answers :attr:`FakeAudioAPI.default_transcript`. Speech
answers espeak-ng's WAV of the input whatever format was asked for (as some compatible servers
do), so Talon's conversion to OGG/Opus runs. :meth:`FakeAudioAPI.fail_next` makes the next calls
answer an error status; :attr:`FakeAudioAPI.delay` slows every answer.

Control routes (standalone): ``GET /_fake/requests`` (what was asked), ``POST /_fake/fail``
``{"endpoint": "transcriptions"|"speech", "count": N, "status": 503}``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import struct
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.voice_maker import SPOKEN_TAG, wav_of

__all__ = ["FakeAudioAPI", "heard_in"]

_TAG = re.compile(re.escape(SPOKEN_TAG.encode()) + rb"[=\x00]", re.IGNORECASE)


def heard_in(audio: bytes) -> str | None:
    """The sentence :func:`~tests.fakes.voice_maker.voice_note` wrote into ``audio``, if any: an
    OGG comment (a 4-byte length, then ``KEY=value``) or an ID3 text frame (``KEY\\0value``)."""
    found = _TAG.search(audio)
    if found is None:
        return None
    start = found.end()
    if audio[found.end() - 1 : found.end()] == b"=" and found.start() >= 4:
        (length,) = struct.unpack_from("<I", audio, found.start() - 4)
        end = found.start() + length
        if start <= end <= len(audio):
            return audio[start:end].decode("utf-8", "replace")
    end = start
    while end < len(audio) and 32 <= audio[end] < 127:
        end += 1
    return audio[start:end].decode("utf-8", "replace")


class FakeAudioAPI:
    def __init__(self, *, api_key: str = "audio-test-key", delay: float = 0.0) -> None:
        self.api_key = api_key
        self.delay = delay
        self.default_transcript = "(nothing recognisable)"
        self.transcriptions: list[dict[str, Any]] = []  # model, language, filename, size, sha256, heard
        self.speeches: list[dict[str, Any]] = []  # model, voice, input, response_format
        self._failures: dict[str, deque[int]] = defaultdict(deque)
        self._runner: web.AppRunner | None = None
        self.url = ""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def fail_next(self, endpoint: str, count: int = 1, status: int = 503) -> None:
        """The next ``count`` calls of ``endpoint`` (``transcriptions`` or ``speech``) answer ``status``."""
        self._failures[endpoint].extend([status] * count)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/audio/transcriptions", self._transcribe),
            web.post("/v1/audio/speech", self._speak),
        ]

    async def __aenter__(self) -> FakeAudioAPI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _gate(self, request: web.Request, endpoint: str) -> web.Response | None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided")
        if self._failures[endpoint]:
            status = self._failures[endpoint].popleft()
            return _error(status, f"the fake answers {status} as told")
        return None

    async def _transcribe(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        refused = await self._gate(request, "transcriptions")
        fields: dict[str, str] = {}
        audio, filename = b"", ""
        async for part in await request.multipart():
            if part.name == "file":  # type: ignore[union-attr]
                filename = part.filename or ""  # type: ignore[union-attr]
                audio = await part.read()  # type: ignore[union-attr]
            else:
                fields[str(part.name)] = await part.text()  # type: ignore[union-attr]
        heard = heard_in(audio)
        self.transcriptions.append(
            {
                "model": fields.get("model"),
                "language": fields.get("language"),
                "filename": filename,
                "size": len(audio),
                "sha256": hashlib.sha256(audio).hexdigest(),
                "heard": heard,
                "refused": refused is not None,
                "at": arrived,  # time.monotonic() when the request arrived
            }
        )
        if refused is not None:
            return refused
        if not audio:
            return _error(400, "no file in the request")
        self.transcriptions[-1]["answered_at"] = time.monotonic()
        return web.json_response({"text": heard if heard is not None else self.default_transcript})

    async def _speak(self, request: web.Request) -> web.Response:
        refused = await self._gate(request, "speech")
        body = await request.json()
        self.speeches.append({**{k: body.get(k) for k in ("model", "voice", "input", "response_format")}})
        if refused is not None:
            return refused
        text = str(body.get("input") or "")
        if not text:
            return _error(400, "input is empty")
        wav = await asyncio.to_thread(wav_of, text[:500])
        return web.Response(body=wav, content_type="audio/wav")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "fake_error"}}, status=status)


def _control_routes(fake: FakeAudioAPI) -> list[web.RouteDef]:
    async def requests(request: web.Request) -> web.Response:
        return web.json_response({"transcriptions": fake.transcriptions, "speeches": fake.speeches})

    async def fail(request: web.Request) -> web.Response:
        body = await request.json()
        fake.fail_next(str(body["endpoint"]), int(body.get("count", 1)), int(body.get("status", 503)))
        return web.json_response({"ok": True})

    return [web.get("/_fake/requests", requests), web.post("/_fake/fail", fail)]


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeAudioAPI(delay=args.latency)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_routes([*fake.routes(), *_control_routes(fake)])
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
    parser = argparse.ArgumentParser(description="an OpenAI-compatible audio API stand-in on 127.0.0.1")
    parser.add_argument("--port-file", type=Path, required=True, help="written with url, base_url, api_key")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each answer")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
