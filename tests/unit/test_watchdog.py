"""The systemd notifier: states reach the socket, pings come from the loop and stop when
it blocks, and nothing breaks outside systemd."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.watchdog import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    yield path, sock
    sock.close()


def _received(sock: socket.socket) -> list[tuple[float, str]]:
    out = []
    while True:
        try:
            out.append((time.monotonic(), sock.recv(4096).decode()))
        except BlockingIOError:
            return out


def test_outside_systemd_there_is_no_notifier() -> None:
    assert SystemdNotifier.from_environ({}) is None


def test_the_watchdog_interval_comes_from_watchdog_usec_for_this_process() -> None:
    mine = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}
    assert SystemdNotifier.from_environ(mine).watchdog_seconds == 30.0
    other = {**mine, "WATCHDOG_PID": "1"}
    assert SystemdNotifier.from_environ(other).watchdog_seconds is None
    assert (
        SystemdNotifier.from_environ({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "soon"}).watchdog_seconds
        is None
    )


def test_a_state_reaches_the_socket(notify_socket: tuple[str, socket.socket]) -> None:
    path, sock = notify_socket
    assert SystemdNotifier(path).notify("READY=1")
    assert [text for _, text in _received(sock)] == ["READY=1"]


def test_abstract_socket_names_are_understood() -> None:
    name = f"talon-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert SystemdNotifier("@" + name).notify("STOPPING=1")
        assert sock.recv(100) == b"STOPPING=1"


def test_a_missing_socket_is_reported_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = SystemdNotifier(str(tmp_path / "gone"))
    assert not notifier.notify("WATCHDOG=1")
    assert not notifier.notify("WATCHDOG=1")
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1


async def test_pings_stop_while_the_event_loop_is_blocked(notify_socket: tuple[str, socket.socket]) -> None:
    path, sock = notify_socket
    notifier = SystemdNotifier(path, watchdog_seconds=0.1)  # a ping every 50 ms
    pinging = asyncio.create_task(notifier.ping_forever())
    await asyncio.sleep(0.3)
    before = _received(sock)
    blocked_at = time.monotonic()
    time.sleep(0.5)  # noqa: ASYNC251 -- the loop is blocked on purpose: no ping may be sent
    during = [t for t, _ in _received(sock) if t > blocked_at]
    await asyncio.sleep(0.3)
    after = _received(sock)
    pinging.cancel()
    assert len(before) >= 3 and {text for _, text in before} == {"WATCHDOG=1"}
    assert during == []
    assert len(after) >= 3


async def test_no_watchdog_means_no_pings(notify_socket: tuple[str, socket.socket]) -> None:
    path, sock = notify_socket
    await asyncio.wait_for(SystemdNotifier(path).ping_forever(), 1)
    assert _received(sock) == []
