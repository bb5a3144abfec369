"""Stand-ins for the Anthropic Messages API and the OpenAI Chat Completions API.

Real HTTP servers on 127.0.0.1 (port 0 by default) that the official SDKs talk to through
``base_url``::

    async with FakeAnthropic() as fake:        # fake.base_url == "http://127.0.0.1:PORT"
        fake.script(Reply(text="hello"), Error(429, retry_after=1), Error(529), Malformed())
        ...
        fake.requests                          # every JSON body received, in order

    async with FakeOpenAI() as fake:           # fake.base_url == "http://127.0.0.1:PORT/v1"
        ...

Each request takes the next scripted step; when the script is empty the ``responder``
answers (``echo_responder`` by default). Requests the real API would reject (a
``tool_result`` without its ``tool_use``, a ``tool`` message without its ``tool_calls``)
get the API's 400 without using up a step.

A scripted reply can be streamed cut anywhere: ``Reply(text=..., utf16_cuts=EVERY_UNIT)``
splits surrogate pairs between deltas, ``raw_utf8`` sends UTF-8 instead of ``\\u`` escapes,
``cut_characters`` ends network writes inside characters, and ``bytes`` in ``chunks`` send
invalid UTF-8 (see :class:`~tests.fakes.model_script.Reply`).

Run standalone for a daemon in another process::

    python -m tests.fakes.model_api --kind anthropic --port-file PATH [--delay S] [--split] [--attach-channel NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import tempfile
from collections import deque
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from tests.fakes import model_anthropic, model_openai
from tests.fakes.model_script import (
    EVERY_UNIT,
    Call,
    Disconnect,
    Error,
    Malformed,
    Reply,
    Responder,
    Step,
    attach_responder,
    delayed,
    draw_responder,
    echo_responder,
    split_everywhere,
    streamed_slowly,
)

__all__ = [
    "EVERY_UNIT",
    "Call",
    "Disconnect",
    "Error",
    "FakeAnthropic",
    "FakeOpenAI",
    "Malformed",
    "Reply",
    "echo_responder",
]


class _FakeModelAPI:
    """The HTTP plumbing both stand-ins share; subclasses speak one API's wire format."""

    path = ""
    url_suffix = ""

    def __init__(self, *, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.responder: Responder = responder or echo_responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._steps: deque[Step] = deque()
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    # ------------------------------------------------------------ test API

    def script(self, *steps: Step) -> None:
        """Queue steps; each request takes the next one."""
        self._steps.extend(steps)

    @property
    def pending(self) -> int:
        """Scripted steps not used yet."""
        return len(self._steps)

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the server is not running; use `async with` or await start()")
        return self._base_url

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        # handler_cancellation: a client that gave up (timeout test) frees its delayed handler.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        self._base_url = f"http://{self._host}:{port}{self.url_suffix}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._base_url = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ serving

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        try:
            body = json.loads(await request.read())
        except ValueError:
            self.requests.append({})
            return self._json(400, self._invalid_request("the request body is not valid JSON"))
        if not isinstance(body, dict):
            self.requests.append({})
            return self._json(400, self._invalid_request("the request body must be a JSON object"))
        self.requests.append(body)
        problem = self._validate(body)
        if problem:
            return self._json(400, self._invalid_request(problem))
        step = self._steps.popleft() if self._steps else self.responder(body)
        if step.delay:
            await asyncio.sleep(step.delay)
        streaming = bool(body.get("stream"))
        if isinstance(step, Disconnect):
            return await self._disconnect(request, step, body)
        if isinstance(step, Malformed):
            return await self._malformed(request, step, streaming)
        if isinstance(step, Error):
            if step.in_stream and streaming:
                return await self._send_stream(request, self._error_stream(step, body))
            headers = {"retry-after": f"{step.retry_after:g}"} if step.retry_after is not None else {}
            return self._json(step.status, self._error_body(step), headers)
        if streaming:
            events = self._stream(step, body)
            return await self._send_stream(request, events, step.chunk_delay, step.cut_characters)
        return self._json(200, self._complete(step, body))

    @staticmethod
    def _json(status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(
            status=status, text=json.dumps(data), content_type="application/json", headers=headers
        )

    @staticmethod
    async def _open_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Cache-Control": "no-cache"})
        response.content_type = "text/event-stream"
        await response.prepare(request)
        return response

    async def _send_stream(
        self, request: web.Request, events: list[bytes], gap: float = 0.0, cut_characters: bool = False
    ) -> web.StreamResponse:
        response = await self._open_stream(request)
        for i, event in enumerate(events):
            if gap and i:
                await asyncio.sleep(gap)
            for n, piece in enumerate(_cut_inside_characters(event) if cut_characters else [event]):
                if n:
                    await asyncio.sleep(0.001)  # the client reads the piece before the next arrives
                await response.write(piece)
        await response.write_eof()
        return response

    async def _malformed(self, request: web.Request, step: Malformed, streaming: bool) -> web.StreamResponse:
        if not streaming:
            return web.Response(
                status=200, text=step.body or '{"id": "broken", ', content_type="application/json"
            )
        response = await self._open_stream(request)
        await response.write(step.body.encode() if step.body is not None else self._broken_stream)
        await response.write_eof()
        return response

    async def _disconnect(
        self, request: web.Request, step: Disconnect, body: dict[str, Any]
    ) -> web.StreamResponse:
        if step.after_events is not None:
            response = await self._open_stream(request)
            events = self._stream(Reply(text="this reply is cut off before it ends"), body)
            for event in events[: step.after_events]:
                await response.write(event)
        else:
            response = web.StreamResponse()
        transport = request.transport
        if transport is not None:
            transport.abort()
        return response

    # ------------------------------------------------------------ per API

    _broken_stream = b""

    def _validate(self, body: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def _invalid_request(self, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def _error_body(self, error: Error) -> dict[str, Any]:
        raise NotImplementedError

    def _stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        raise NotImplementedError

    def _error_stream(self, error: Error, body: dict[str, Any]) -> list[bytes]:
        raise NotImplementedError

    def _complete(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def _cut_inside_characters(data: bytes) -> list[bytes]:
    """``data`` cut after the first byte of every multi-byte UTF-8 character."""
    cuts = [i + 1 for i, byte in enumerate(data) if byte >= 0xC0]
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if a < b]


class FakeAnthropic(_FakeModelAPI):
    """``POST /v1/messages``; ``base_url`` is the server root, as the SDK expects."""

    path = "/v1/messages"
    _broken_stream = model_anthropic.BROKEN_STREAM

    def _validate(self, body: dict[str, Any]) -> str | None:
        return model_anthropic.validate(body)

    def _invalid_request(self, message: str) -> dict[str, Any]:
        return model_anthropic.error_body("invalid_request_error", message)

    def _error_body(self, error: Error) -> dict[str, Any]:
        message = error.message or f"scripted error {error.status}"
        return model_anthropic.error_body(model_anthropic.error_type(error), message)

    def _stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        return [
            model_anthropic.encode_event(n, d, raw_utf8=reply.raw_utf8)
            for n, d in model_anthropic.stream_events(reply, body)
        ]

    def _error_stream(self, error: Error, body: dict[str, Any]) -> list[bytes]:
        return [
            model_anthropic.encode_event(n, d) for n, d in model_anthropic.error_stream_events(error, body)
        ]

    def _complete(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        return model_anthropic.message_json(reply, body)


class FakeOpenAI(_FakeModelAPI):
    """``POST /v1/chat/completions``; ``base_url`` ends in ``/v1``, as the SDK expects."""

    path = "/v1/chat/completions"
    url_suffix = "/v1"
    _broken_stream = model_openai.BROKEN_STREAM

    def _validate(self, body: dict[str, Any]) -> str | None:
        return model_openai.validate(body)

    def _invalid_request(self, message: str) -> dict[str, Any]:
        return model_openai.invalid_request(message)

    def _error_body(self, error: Error) -> dict[str, Any]:
        return model_openai.error_body(error)

    def _stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        chunks = [
            model_openai.encode_chunk(c, raw_utf8=reply.raw_utf8)
            for c in model_openai.stream_chunks(reply, body)
        ]
        return [*chunks, model_openai.encode_chunk("[DONE]")]

    def _error_stream(self, error: Error, body: dict[str, Any]) -> list[bytes]:
        return [model_openai.encode_chunk(c) for c in model_openai.error_stream_chunks(error, body)]

    def _complete(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        return model_openai.completion_json(reply, body)


# ---------------------------------------------------------------- standalone


def _write_atomically(path: Path, text: str) -> None:
    # A reader polling for the file never sees it half written.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


async def serve(
    kind: str,
    port_file: Path,
    *,
    delay: float = 0.0,
    max_seconds: float = 600.0,
    port: int = 0,
    split: bool = False,
    attach_channel: str | None = None,
    chunk_delay: float = 0.0,
    draw: bool = False,
) -> None:
    """Serve the echo responder (or :func:`attach_responder` for ``attach_channel``) until
    SIGTERM/SIGINT or ``max_seconds``; write the base URL to ``port_file``."""
    responder = (
        attach_responder(attach_channel) if attach_channel else draw_responder if draw else echo_responder
    )
    responder = split_everywhere(responder) if split else responder
    responder = delayed(responder, delay) if delay else responder
    responder = streamed_slowly(responder, chunk_delay) if chunk_delay else responder
    fake: _FakeModelAPI = (FakeAnthropic if kind == "anthropic" else FakeOpenAI)(
        responder=responder, port=port
    )
    await serve_until_stopped(fake, port_file, max_seconds)


async def serve_until_stopped(fake: _FakeModelAPI, port_file: Path, max_seconds: float) -> None:
    """Run ``fake`` until SIGTERM/SIGINT or ``max_seconds``, its base URL written to ``port_file``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with fake:
        _write_atomically(port_file, fake.base_url)
        try:
            await asyncio.wait_for(stop.wait(), max_seconds)
        except TimeoutError:
            pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Serve a stand-in model API that echoes the last user message."
    )
    parser.add_argument("--kind", choices=("anthropic", "openai"), required=True)
    parser.add_argument(
        "--port-file", type=Path, required=True, help="written with the base URL once listening"
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each reply starts")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed words")
    parser.add_argument(
        "--split",
        action="store_true",
        help="stream replies cut at every UTF-16 code unit, as raw UTF-8, with writes cut inside characters",
    )
    parser.add_argument(
        "--attach-channel",
        help="answer 'attach PATH ...' by calling channel_send into this channel with those attachments",
    )
    parser.add_argument("--draw", action="store_true", help="answer 'draw PROMPT' by calling image_generate")
    args = parser.parse_args(argv)
    asyncio.run(
        serve(
            args.kind,
            args.port_file,
            delay=args.delay,
            max_seconds=args.max_seconds,
            port=args.port,
            split=args.split,
            attach_channel=args.attach_channel,
            draw=args.draw,
            chunk_delay=args.chunk_delay,
        )
    )


if __name__ == "__main__":
    main()
