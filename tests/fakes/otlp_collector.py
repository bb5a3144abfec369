"""An OpenTelemetry collector stand-in: OTLP/HTTP ``POST /v1/traces`` on 127.0.0.1.

Requests are ``ExportTraceServiceRequest`` protobufs (decoded with opentelemetry-proto), each
body at most :data:`MAX_BODY` bytes and at most :data:`MAX_SPANS` spans kept in all. The spans
are served as JSON at ``GET /_fake/spans``: name, hex trace/span/parent ids, links, status,
attributes (plain values) and the resource's ``service.name``; ``/_fake/requests`` counts the
exports and keeps each one's headers.

In a test: ``async with OtlpCollector() as collector: ... collector.spans``. As a process::

    python -m tests.fakes.otlp_collector --port-file PATH [--max-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import Any, Self

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.model_api import _write_atomically

MAX_BODY = 4 * 1024 * 1024
MAX_SPANS = 20_000


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def decode(body: bytes) -> list[dict[str, Any]]:
    """The spans of one export request, as plain dicts."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[dict[str, Any]] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "links": [
                            {"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex()} for ln in span.links
                        ],
                        "status": span.status.code,  # 0 unset, 1 ok, 2 error
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
                        "events": [e.name for e in span.events],
                        "service": resource.get("service.name"),
                    }
                )
    return spans


class OtlpCollector:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, status: int = 200) -> None:
        self.spans: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.status = status  # what exports are answered with (e.g. 503 to refuse them)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _export(self, request: web.Request) -> web.Response:
        if request.content_type != "application/x-protobuf":
            return web.Response(status=415, text="expected application/x-protobuf")
        if request.headers.get("Content-Encoding", "identity") != "identity":
            return web.Response(status=415, text="compression is not supported here")
        body = await request.read()
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        if self.status != 200:
            return web.Response(status=self.status)
        try:
            spans = decode(body)
        except Exception as exc:
            return web.Response(status=400, text=f"not an ExportTraceServiceRequest: {exc}")
        self.spans.extend(spans[: max(0, MAX_SPANS - len(self.spans))])
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    async def _spans(self, request: web.Request) -> web.Response:
        return web.json_response(self.spans)

    async def _requests(self, request: web.Request) -> web.Response:
        return web.json_response({"count": len(self.headers), "headers": self.headers})

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/traces", self._export)
        app.router.add_get("/_fake/spans", self._spans)
        app.router.add_get("/_fake/requests", self._requests)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self.url = f"http://{self._host}:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve(port_file: Path, max_seconds: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with OtlpCollector() as collector:
        _write_atomically(port_file, collector.url)
        try:
            await asyncio.wait_for(stop.wait(), max_seconds)
        except TimeoutError:
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description="An OTLP/HTTP trace collector stand-in on 127.0.0.1.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args()
    asyncio.run(serve(args.port_file, args.max_seconds))


if __name__ == "__main__":
    main()
