"""``talon run`` under a ``Type=notify`` unit: READY once ready, watchdog pings at half of
WatchdogSec, STOPPING on SIGTERM — against a stand-in for systemd's notify socket."""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from pathlib import Path

import pytest

from tests.deployed.support import fake_process, write_deployed_config
from tests.e2e.daemon import Daemon, talon_env

pytestmark = pytest.mark.timeout(120)


async def _datagrams(sock: socket.socket, until: float) -> list[tuple[float, str]]:
    loop = asyncio.get_running_loop()
    out = []
    while time.monotonic() < until:
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 4096), until - time.monotonic())
        except TimeoutError:
            break
        out.append((time.monotonic(), data.decode()))
    return out


async def test_the_daemon_tells_systemd_it_is_ready_alive_and_stopping(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        config = write_deployed_config(
            tmp_path, model_url=model.url, channels=[{"name": "console", "type": "console"}]
        )
        env = talon_env({"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "1000000"})
        async with Daemon(config, env) as daemon:
            await daemon.start(tmp_path / "data", ready_timeout=60)
            running = await _datagrams(sock, time.monotonic() + 2.5)
            assert await daemon.stop() == 0
            stopping = await _datagrams(sock, time.monotonic() + 0.5)
    sock.close()
    states = [text for _, text in running]
    assert states[0].splitlines()[0] == "READY=1"
    pings = [t for t, text in running if text == "WATCHDOG=1"]
    assert len(pings) >= 4  # every 500 ms for 2.5 s
    # systemd restarts a unit whose pings are further apart than WatchdogSec (1 s here)
    assert max(b - a for a, b in itertools.pairwise(pings)) < 1.0
    assert "STOPPING=1" in [text for _, text in stopping]
