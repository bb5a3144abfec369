"""The HTTP server seam: features' routes served with the security headers on every response,
the body cap, the URL file, and ``http:`` settings that name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gateway.config import ConfigError, Settings
from gateway.http.features import HttpFeature
from gateway.http.security import SECURITY_HEADERS
from gateway.http.server import URL_FILE, HttpServer
from gateway.http.settings import HttpSettings


class Echo:
    name = "echo"

    def __init__(self) -> None:
        self.started = self.cleaned = 0

    def install(self, app: web.Application) -> None:
        app.router.add_post("/echo", self._echo)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)

    async def _echo(self, request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def _startup(self, app: web.Application) -> None:
        self.started += 1

    async def _cleanup(self, app: web.Application) -> None:
        self.cleaned += 1


async def test_features_routes_are_served_with_security_headers_on_every_response(tmp_path: Path) -> None:
    echo = Echo()
    assert isinstance(echo, HttpFeature)
    server = HttpServer(HttpSettings(listen="127.0.0.1:0", max_body_bytes=2048), [echo], data_path=tmp_path)
    await server.start()
    try:
        assert echo.started == 1
        assert server.url is not None and server.url.startswith("http://127.0.0.1:")
        assert (tmp_path / URL_FILE).read_text().strip() == server.url
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{server.url}/echo", data=b"hi") as resp:
                assert resp.status == 200 and await resp.read() == b"hi"
                ok = resp.headers
            async with session.get(f"{server.url}/nowhere") as resp:
                assert resp.status == 404
                missing = resp.headers
            async with session.post(f"{server.url}/echo", data=b"x" * 4096) as resp:
                assert resp.status == 413
                too_big = resp.headers
            async with session.get(f"{server.url}/healthz") as resp:
                assert await resp.json() == {"ok": True}
        for headers in (ok, missing, too_big):
            for name, value in SECURITY_HEADERS.items():
                assert headers[name] == value
        assert "default-src 'self'" in ok["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in ok["Content-Security-Policy"]
    finally:
        await server.stop()
    assert echo.cleaned == 1
    assert not (tmp_path / URL_FILE).exists()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(f"{server.url}/healthz")


async def test_a_taken_port_is_a_config_error_naming_http_listen() -> None:
    first = HttpServer(HttpSettings(listen="127.0.0.1:0"), [])
    await first.start()
    try:
        second = HttpServer(HttpSettings(listen=first.url.removeprefix("http://")), [])  # type: ignore[union-attr]
        with pytest.raises(ConfigError, match=r"http\.listen: cannot listen on 127\.0\.0\.1:\d+"):
            await second.start()
    finally:
        await first.stop()


def test_http_is_off_unless_configured_and_loopback_by_default() -> None:
    assert Settings.model_validate({}).http is None
    on = Settings.model_validate({"http": {}}).http
    assert on is not None and on.listen == "127.0.0.1:8787" and on.loopback
    wide = HttpSettings(listen="0.0.0.0:8787")
    assert (wide.host, wide.port, wide.loopback) == ("0.0.0.0", 8787, False)
    assert HttpSettings(listen="[::1]:9000").host == "::1" and HttpSettings(listen="[::1]:9000").loopback


@pytest.mark.parametrize(
    ("http", "says"),
    [
        ({"listen": "8787"}, 'http.listen: .*listen must be "HOST:PORT"'),
        ({"listen": "127.0.0.1:99999"}, "http.listen: .*port 0-65535"),
        ({"public_url": "talon.example.com"}, "http.public_url: .*https://"),
        ({"lisen": "127.0.0.1:1"}, "http.lisen"),
        (
            {
                "webhooks": [
                    {
                        "name": "gh",
                        "path": "/hooks/gh",
                        "auth": "github",
                        "secret": "s" * 20,
                        "prompt": "p",
                        "persona": "ops",
                        "channel": "tg-team",
                        "chat": 1,
                    }
                ]
            },
            r"http\.webhooks\[0\]\.channel: no channel named 'tg-team'",
        ),
    ],
)
def test_invalid_http_settings_name_the_key_and_the_fix(tmp_path: Path, http: dict, says: str) -> None:
    import yaml

    from gateway.config import load_settings

    (tmp_path / "talon.yaml").write_text(yaml.safe_dump({"http": http}))
    with pytest.raises(ConfigError, match=says):
        load_settings(tmp_path / "talon.yaml")
