"""``talon run`` with and without ``http:``: a route served with the security headers on
loopback, and no TCP listener at all when the key is absent."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.deployed.support import deployed_daemon, fake_process, listening_tcp, write_deployed_config

pytestmark = pytest.mark.timeout(120)


async def test_http_serves_on_loopback_with_security_headers_only_when_configured(tmp_path: Path) -> None:
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        off = tmp_path / "off"
        off.mkdir()
        config = write_deployed_config(
            off, model_url=model.url, channels=[{"name": "console", "type": "console"}]
        )
        async with deployed_daemon(config) as daemon:
            assert daemon.proc is not None
            assert listening_tcp(daemon.proc.pid) == []
            assert not (off / "data" / "http.url").exists()

        on = tmp_path / "on"
        on.mkdir()
        config = write_deployed_config(
            on,
            model_url=model.url,
            channels=[{"name": "console", "type": "console"}],
            http={"listen": "127.0.0.1:0"},
        )
        async with deployed_daemon(config) as daemon:
            assert daemon.proc is not None
            url = (on / "data" / "http.url").read_text().strip()
            listeners = listening_tcp(daemon.proc.pid)
            assert [host for host, _ in listeners] == ["127.0.0.1"]
            assert url == f"http://127.0.0.1:{listeners[0][1]}"
            async with aiohttp.ClientSession() as session, session.get(f"{url}/healthz") as resp:
                assert resp.status == 200
                assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
                assert resp.headers["X-Frame-Options"] == "DENY"
                assert resp.headers["X-Content-Type-Options"] == "nosniff"
                assert resp.headers["Referrer-Policy"] == "no-referrer"
            assert await daemon.stop() == 0
        assert not (on / "data" / "http.url").exists()
