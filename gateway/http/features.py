"""The seam features plug into the HTTP server with.

A feature is built by the daemon from the config with the parts it needs, then
:meth:`HttpFeature.install` adds its routes (and, when it needs them, ``app.on_startup`` /
``app.on_cleanup`` hooks, run by :meth:`gateway.http.server.HttpServer.start` and ``stop``)
to the one application. Paths are the feature's own: ``/metrics``, ``/hooks/...``,
``/console/...``, ``/chat/...``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aiohttp import web

__all__ = ["HttpFeature"]


@runtime_checkable
class HttpFeature(Protocol):
    name: str

    def install(self, app: web.Application) -> None: ...
