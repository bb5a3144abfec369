"""The one HTTP server: an aiohttp application with the features' routes, security headers
on every response, started and stopped by the daemon."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from gateway.errors import ConfigError
from gateway.http.features import HttpFeature
from gateway.http.security import install_security_headers
from gateway.http.settings import HttpSettings

__all__ = ["URL_FILE", "HttpServer"]

log = logging.getLogger("talon.http")

# Written into the data dir once listening: the URL the server answers at (the real port
# when listen says port 0), for tools and tests on this host.
URL_FILE = "http.url"


class HttpServer:
    """One aiohttp application serving every feature.

    Args:
        settings (:class:`gateway.http.settings.HttpSettings`): ``http:`` from talon.yaml.
        features (Sequence[:class:`gateway.http.features.HttpFeature`]): installed in order.
        data_path (:class:`pathlib.Path` | :obj:`None`): where :data:`URL_FILE` is written.
    """

    def __init__(
        self, settings: HttpSettings, features: Sequence[HttpFeature], data_path: Path | None = None
    ) -> None:
        self.settings = settings
        self.features = list(features)
        self.data_path = data_path
        self.app = web.Application(client_max_size=settings.max_body_bytes)
        install_security_headers(self.app)
        self.app.router.add_get("/healthz", _healthz)
        for feature in self.features:
            feature.install(self.app)
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    async def start(self) -> None:
        """Listen on ``settings.listen``; runs the features' ``on_startup`` hooks first.

        Raises:
            ConfigError: the address is taken or not one of this host's.
        """
        # No access log: paths can carry ids, and scrapers call every few seconds.
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.settings.host, self.settings.port, reuse_address=True)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                [
                    f"http.listen: cannot listen on {self.settings.listen}: {exc.strerror or exc}; "
                    "choose a free port on an address of this host"
                ]
            ) from None
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = _bound(runner, self.settings)
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        if self.data_path is not None:
            (self.data_path / URL_FILE).write_text(self.url + "\n", encoding="utf-8")
        names = ", ".join(f.name for f in self.features) or "no features"
        if self.settings.loopback:
            log.info("http server on %s (%s)", self.url, names)
        else:
            log.warning(
                "http server on %s beyond loopback (%s); serve it through a TLS reverse proxy",
                self.url,
                names,
            )

    async def stop(self) -> None:
        """Stop listening, close open connections, run the features' ``on_cleanup`` hooks."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self.data_path is not None:
            (self.data_path / URL_FILE).unlink(missing_ok=True)
        await runner.cleanup()

    def public_url(self, path: str = "/") -> str:
        """``path`` as users reach it: under ``public_url`` when set, else the bound address."""
        base = self.settings.public_url or self.url or f"http://{self.settings.listen}"
        return base.rstrip("/") + "/" + path.lstrip("/")


async def _healthz(request: web.Request) -> web.Response:
    """For a reverse proxy's or orchestrator's liveness check; says nothing else."""
    return web.json_response({"ok": True})


def _bound(runner: web.AppRunner, settings: HttpSettings) -> tuple[str, int]:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return str(address[0]), int(address[1])
    return settings.host, settings.port
