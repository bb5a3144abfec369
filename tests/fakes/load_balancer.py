"""A round-robin HTTP load balancer in a process of its own, in front of several ``talon run``
nodes, for tests that run a cluster as users deploy it.

    python -m tests.fakes.load_balancer --port-file PATH --route /telegram=PORT,PORT \\
        [--route /slack=PORT,PORT] [--drop-rate 0.05] [--seed 1] [--max-seconds 600]

A request whose path starts with a route's prefix goes to that route's backends on
127.0.0.1 in turn, path, query, headers and body as they came. A backend that refuses the
connection (its node is down) is skipped for the next one, as nginx's ``proxy_next_upstream
error`` does; a backend that fails once it has the request is answered 502, since the request
may have been carried out. With ``--drop-rate`` a share of the backends' answers is lost on
the way back: the backend has done the work, and the client hears 502 and sends the request
again, which may then reach another node.

``GET /_lb/stats`` answers ``{"<prefix>": {"<port>": {"answered", "refused", "failed",
"dropped"}}}``. The port file holds ``{"url"}``.
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

import aiohttp
from aiohttp import web

# Headers that belong to one hop, not to the request (RFC 9110 section 7.6.1).
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "content-length"})


class Route:
    """One path prefix and its backends, taken in turn."""

    def __init__(self, prefix: str, ports: list[int]) -> None:
        self.prefix = prefix
        self.ports = ports
        self.stats: dict[int, Counter[str]] = {port: Counter() for port in ports}
        self._turn = 0

    def order(self) -> list[int]:
        """The backends to try for the next request: the next in turn first."""
        start = self._turn % len(self.ports)
        self._turn += 1
        return self.ports[start:] + self.ports[:start]


def _route(text: str) -> Route:
    prefix, _, ports = text.partition("=")
    if not prefix.startswith("/") or not ports:
        raise argparse.ArgumentTypeError(f"--route wants /PREFIX=PORT,PORT, not {text!r}")
    return Route(prefix, [int(p) for p in ports.split(",")])


class Balancer:
    def __init__(self, routes: list[Route], drop_rate: float, seed: int) -> None:
        self.routes = routes
        self.drop_rate = drop_rate
        self._rng = random.Random(seed)
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def forward(self, request: web.Request) -> web.Response:
        route = next((r for r in self.routes if request.path.startswith(r.prefix)), None)
        if route is None:
            return web.Response(status=404, text="no route")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        assert self._session is not None
        for port in route.order():
            url = f"http://127.0.0.1:{port}{request.path_qs}"
            try:
                async with self._session.request(request.method, url, data=body, headers=headers) as resp:
                    answer = await resp.read()
                    status, content_type = resp.status, resp.content_type
            except aiohttp.ClientConnectorError:
                route.stats[port]["refused"] += 1
                continue  # nothing reached the node: the next one gets the request
            except (aiohttp.ClientError, TimeoutError):
                route.stats[port]["failed"] += 1
                return web.Response(status=502, text="bad gateway")
            if self._rng.random() < self.drop_rate:
                route.stats[port]["dropped"] += 1
                return web.Response(status=502, text="bad gateway")
            route.stats[port]["answered"] += 1
            return web.Response(status=status, body=answer, content_type=content_type)
        return web.Response(status=502, text="no backend up")

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {r.prefix: {str(port): dict(counts) for port, counts in r.stats.items()} for r in self.routes}
        )


async def serve(args: argparse.Namespace) -> None:
    balancer = Balancer(args.route, args.drop_rate, args.seed)
    await balancer.start()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/_lb/stats", balancer.stats)
    app.router.add_route("*", "/{tail:.*}", balancer.forward)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": f"http://127.0.0.1:{port}"}))
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
        await balancer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True, help="written with the url once listening")
    parser.add_argument(
        "--route", type=_route, action="append", required=True, help="/PREFIX=PORT,PORT (repeatable)"
    )
    parser.add_argument("--drop-rate", type=float, default=0.0, help="share of answers lost on the way back")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="exit after this long regardless")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
