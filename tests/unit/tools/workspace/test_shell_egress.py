"""``shell.network: guarded``: the sandbox reaches the network only through the net_http guard.

A web server and a TCP greeter on 127.0.0.1 stand in for the internet; the guard blocks
loopback unless ``net_http.allowed_private_hosts`` names it, which is how these tests open
the way. Decisions about other addresses are checked with a stub resolver, so no packet
leaves loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.config import Settings
from gateway.sandbox import sandbox_problem
from tools.base import ToolContext
from tools.ssrf import EgressPolicy, IPAddress
from tools.workspace import jobs
from tools.workspace.egress_proxy import PROXY_PORT, GuardedEgress
from tools.workspace.roots import thread_workspace
from tools.workspace.shell import run_bash

from .conftest import make_persona

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")

SHELL = ("shell.exec:sandbox", "fs.read:persona", "fs.write:persona")
FETCH = (
    'python3 -c "import urllib.request as u, urllib.error as e, sys\n'
    "try: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    'except e.HTTPError as x: print(x.code, x.read().decode())" {url}'
)


@pytest.fixture
async def site() -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 that answers ``/hello`` with the Host it was asked for."""

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"hello from {request.host}{request.path_qs}")

    app = web.Application()
    app.router.add_get("/hello", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    yield runner.addresses[0][1]
    await runner.cleanup()


def guarded_ctx(tmp_path: Path, private_hosts: list[str]) -> ToolContext:
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    settings = Settings(
        config_dir=tmp_path, data_dir=Path("data"), net_http={"allowed_private_hosts": private_hosts}
    )
    persona = make_persona(tmp_path, SHELL, shell_network="guarded")
    return ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]


async def bash(ctx: ToolContext, command: str, **args: Any) -> dict[str, Any]:
    return await run_bash(ctx, {"command": command, **args})


async def test_a_host_the_guard_allows_is_reached_through_the_proxy(tmp_path: Path, site: int) -> None:
    ctx = guarded_ctx(tmp_path, ["127.0.0.1"])
    done = await bash(ctx, FETCH.format(url=f"http://127.0.0.1:{site}/hello?x=1"))
    assert done["exit_code"] == 0, done
    assert done["stdout"] == f"hello from 127.0.0.1:{site}/hello?x=1\n"
    curl = await bash(ctx, f"curl -sS http://127.0.0.1:{site}/hello")
    if "not found" not in curl["stderr"]:
        assert curl["stdout"] == f"hello from 127.0.0.1:{site}/hello"


async def test_a_host_the_guard_blocks_gets_its_reason(tmp_path: Path, site: int) -> None:
    done = await bash(guarded_ctx(tmp_path, []), FETCH.format(url=f"http://127.0.0.1:{site}/hello"))
    assert done["stdout"].startswith("403 talon egress guard: blocked: 127.0.0.1 is a loopback address")
    assert "net_http.allowed_private_hosts" in done["stdout"]


async def test_tunnels_carry_other_protocols_to_allowed_hosts(tmp_path: Path, greeter: int) -> None:
    tunnel = (
        f"python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {PROXY_PORT}), 5); "
        f"s.sendall(b'CONNECT 127.0.0.1:{greeter} HTTP/1.1\\r\\n\\r\\n'); import time; time.sleep(0.3); "
        'print(s.recv(4096).decode())"'
    )
    allowed = await bash(guarded_ctx(tmp_path, ["127.0.0.1"]), tunnel)
    assert allowed["stdout"].startswith("HTTP/1.1 200 Connection Established\r\n\r\n")
    assert allowed["stdout"].endswith("hello\n\n")
    refused = await bash(guarded_ctx(tmp_path / "b", []), tunnel)
    assert refused["stdout"].startswith("HTTP/1.1 403 Forbidden")
    assert "hello" not in refused["stdout"]


async def test_going_around_the_proxy_reaches_nothing(tmp_path: Path, greeter: int) -> None:
    direct = (
        f"python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', {greeter}), 3).recv(9))\""
    )
    done = await bash(guarded_ctx(tmp_path, ["127.0.0.1"]), direct)
    assert done["exit_code"] != 0 and "hello" not in done["stdout"]
    assert "Connection refused" in done["stderr"]


def read(path: Path) -> str:
    return path.read_text()


def egress_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("talon-egress-*"))


async def test_the_proxy_ends_with_the_call(tmp_path: Path) -> None:
    before = egress_dirs()
    done = await bash(guarded_ctx(tmp_path, []), "echo $HTTPS_PROXY; ls /run/talon-egress")
    proxy_line, *listing = done["stdout"].splitlines()
    assert proxy_line == f"http://127.0.0.1:{PROXY_PORT}"
    assert "proxy.sock" in listing
    assert egress_dirs() <= before


async def test_network_off_and_on_get_no_proxy(make_ctx: Callable[..., ToolContext]) -> None:
    for network in (False, True):
        done = await bash(make_ctx(labels=SHELL, shell_network=network), "echo ${HTTPS_PROXY:-none}; ls /run")
        assert done["stdout"].split() == ["none"]


async def test_a_background_job_keeps_its_proxy_while_it_runs(tmp_path: Path, site: int) -> None:
    ctx = guarded_ctx(tmp_path, ["127.0.0.1"])
    fetch = "sleep 0.5; " + FETCH.format(url=f"http://127.0.0.1:{site}/hello")
    job = await bash(ctx, fetch, run_in_background=True)
    found = jobs.find_job((ctx.persona.name, ctx.thread_id), job["pid"])
    assert found is not None
    await asyncio.wait_for(found.ended.wait(), 20)
    log = thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id) / ".jobs" / f"{job['job_id']}.log"
    assert f"hello from 127.0.0.1:{site}/hello" in read(log)


# ------------------------------------------------------------ decisions, with a stub resolver


class StubResolver:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers, self.asked = answers, []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        return [ipaddress.ip_address(self.answers[host])]


async def ask(egress: GuardedEgress, request: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(egress.folder / "proxy.sock"))
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


@pytest.fixture
async def proxy_for() -> AsyncIterator[Callable[..., Any]]:
    made: list[GuardedEgress] = []

    async def build(policy: EgressPolicy, resolver: StubResolver) -> GuardedEgress:
        egress = GuardedEgress.create(policy, resolve=resolver)
        await egress.start()
        made.append(egress)
        return egress

    yield build
    for egress in made:
        await egress.close()
        assert not egress.folder.exists()


async def test_a_name_resolving_to_a_private_address_is_refused(proxy_for: Callable[..., Any]) -> None:
    resolver = StubResolver({"intranet.example": "10.0.0.5", "metadata.example": "169.254.169.254"})
    egress = await proxy_for(EgressPolicy.build([], []), resolver)
    private = await ask(egress, b"CONNECT intranet.example:443 HTTP/1.1\r\n\r\n")
    assert private.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"intranet.example resolves to 10.0.0.5, a private address" in private
    plain = await ask(
        egress, b"GET http://metadata.example/latest HTTP/1.1\r\nHost: metadata.example\r\n\r\n"
    )
    assert b"169.254.169.254, a cloud metadata address" in plain


async def test_the_domain_allowlist_is_checked_before_any_lookup(proxy_for: Callable[..., Any]) -> None:
    resolver = StubResolver({})
    egress = await proxy_for(EgressPolicy.build(["example.org"], []), resolver)
    answer = await ask(egress, b"CONNECT elsewhere.example:443 HTTP/1.1\r\n\r\n")
    assert b"elsewhere.example is not in the allowed domains (example.org)" in answer
    assert resolver.asked == []


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
        (b"GET https://x.example/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT no-port HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT x.example:99999 HTTP/1.1\r\n\r\n", b"400"),
        (b"hello\r\n\r\n", b"400"),
        (b"GET http://x.example/ HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n", b"431"),
    ],
)
async def test_malformed_requests_get_a_clear_status(
    proxy_for: Callable[..., Any], request_bytes: bytes, status: bytes
) -> None:
    resolver = StubResolver({})
    egress = await proxy_for(EgressPolicy.build([], []), resolver)
    answer = await ask(egress, request_bytes)
    assert answer.split(b" ")[1] == status, answer
    assert b"talon egress guard:" in answer
    assert resolver.asked == []


async def test_a_name_that_does_not_resolve_in_time_gets_a_timeout(
    proxy_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.workspace.egress_proxy.CONNECT_TIMEOUT", 0.2)

    class SlowResolver(StubResolver):
        async def __call__(self, host: str, port: int) -> list[IPAddress]:
            await asyncio.sleep(5)
            return []

    egress = await proxy_for(EgressPolicy.build([], []), SlowResolver({}))
    answer = await ask(egress, b"CONNECT slow.example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 504 Gateway Timeout")
    assert b"slow.example did not resolve within 0.2 s" in answer
