"""net_http against a local aiohttp server: SSRF blocks, allowlists, redirects, caps and errors."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from yarl import URL

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from tools import egress
from tools.base import ToolContext, ToolError
from tools.host import net_http
from tools.ssrf import EgressPolicy, classify, domain_allowed


@dataclass
class Server:
    port: int
    hits: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    release = asyncio.Event()
    state = Server(port=0)

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        state.hits.append(request.path_qs)
        return await handler(request)

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello", headers={"X-Test": "yes"})

    async def echo(request: web.Request) -> web.Response:
        body = await request.text()
        return web.json_response({"method": request.method, "headers": dict(request.headers), "body": body})

    async def big(request: web.Request) -> web.Response:
        return web.Response(text="a" * 5000)

    async def binary(request: web.Request) -> web.Response:
        return web.Response(body=bytes(range(256)), content_type="application/octet-stream")

    async def latin(request: web.Request) -> web.Response:
        return web.Response(body="café".encode("latin-1"), content_type="text/plain", charset="latin-1")

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="late")

    async def redirect(request: web.Request) -> web.Response:
        status = int(request.query.get("status", "302"))
        raise web.HTTPFound(request.query["to"]) if status == 302 else _redirect(status, request.query["to"])

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    app = web.Application(middlewares=[record])
    app.add_routes(
        [
            web.get("/hello", hello),
            web.route("*", "/echo", echo),
            web.get("/big", big),
            web.get("/binary", binary),
            web.get("/latin", latin),
            web.get("/slow", slow),
            web.route("*", "/redirect", redirect),
            web.get("/loop", loop),
        ]
    )
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        release.set()
        await runner.cleanup()


def _redirect(status: int, location: str) -> web.HTTPException:
    kinds: dict[int, type[web.HTTPException]] = {
        301: web.HTTPMovedPermanently,
        303: web.HTTPSeeOther,
        307: web.HTTPTemporaryRedirect,
        308: web.HTTPPermanentRedirect,
    }
    return kinds[status](location)  # type: ignore[call-arg]


def make_ctx(tmp_path: Path, *, persona_domains: tuple[str, ...] = (), **net: Any) -> ToolContext:
    persona = Persona(
        name="assistant",
        provider="local",
        model="m",
        description=None,
        capabilities=("net.http:egress",),
        system_prompt="# Assistant",
        path=tmp_path,
        allowed_domains=persona_domains,
    )
    settings = Settings(net_http=NetHttpSettings(**net))
    return ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]


async def call(ctx: ToolContext, url: str, method: str = "GET", **extra: Any) -> dict[str, Any]:
    return await net_http.TOOL.handler(ctx, {"method": method, "url": url, **extra})


# ---------------------------------------------------------------- private addresses


async def test_loopback_is_refused_by_default(server: Server, tmp_path: Path) -> None:
    with pytest.raises(ToolError) as caught:
        await call(make_ctx(tmp_path), server.url("/hello"))
    message = str(caught.value)
    assert "blocked: 127.0.0.1 is a loopback address" in message
    assert "net_http.allowed_private_hosts" in message
    assert server.hits == []


async def test_a_name_resolving_to_loopback_is_refused(server: Server, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"blocked: localhost resolves to .*a loopback address"):
        await call(make_ctx(tmp_path), server.url("/hello", host="localhost"))
    assert server.hits == []


@pytest.mark.parametrize(
    ("host", "phrase"),
    [
        ("[::ffff:127.0.0.1]", "IPv4-mapped form of 127.0.0.1"),
        ("[::1]", "loopback"),
        ("169.254.169.254", "cloud metadata"),
        ("10.0.0.5", "private"),
        ("0.0.0.0", "unspecified"),
        ("2130706433", "not a standard IP address"),
        ("127.1", "not a standard IP address"),
    ],
)
async def test_address_forms_of_private_hosts_are_refused(
    server: Server, tmp_path: Path, host: str, phrase: str
) -> None:
    with pytest.raises(ToolError, match=phrase):
        await call(make_ctx(tmp_path), f"http://{host}:{server.port}/hello")
    assert server.hits == []


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8"])
async def test_operator_can_allow_a_private_host(server: Server, tmp_path: Path, entry: str) -> None:
    result = await call(make_ctx(tmp_path, allowed_private_hosts=[entry]), server.url("/hello"))
    assert result["status"] == 200
    assert result["body"] == "hello"
    assert result["bodyEncoding"] == "text"
    assert result["headers"]["X-Test"] == "yes"
    assert result["truncated"] is False
    assert result["url"] == server.url("/hello")


async def test_allowing_a_name_allows_what_it_resolves_to(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["localhost"])
    result = await call(ctx, server.url("/hello", host="localhost"))
    assert result["body"] == "hello"


# ---------------------------------------------------------------- redirects


@pytest.mark.parametrize(
    ("target", "phrase"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://10.0.0.5/admin", "10.0.0.5 is a private address"),
        ("http://[::1]:{port}/hello", "loopback"),
        ("ftp://127.0.0.1/file", "only http: and https:"),
        ("file:///etc/passwd", "only http: and https:"),
    ],
)
async def test_redirect_to_a_blocked_target_is_refused(
    server: Server, tmp_path: Path, target: str, phrase: str
) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    location = target.format(port=server.port)
    with pytest.raises(ToolError, match=phrase):
        await call(ctx, server.url(f"/redirect?to={location}"))
    assert len(server.hits) == 1  # the redirect itself; the target was never contacted


async def test_redirects_are_followed_and_the_final_url_reported(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    result = await call(ctx, server.url("/redirect?to=/hello"))
    assert result["body"] == "hello"
    assert result["url"] == server.url("/hello")


async def test_redirect_loops_stop_after_five_hops(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    with pytest.raises(ToolError, match="stopped after 5 redirects"):
        await call(ctx, server.url("/loop"))
    assert len(server.hits) == 6


async def test_see_other_turns_a_post_into_a_get(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    result = await call(ctx, server.url("/redirect?status=303&to=/echo"), method="POST", body="payload")
    echoed = json.loads(result["body"])
    assert echoed["method"] == "GET" and echoed["body"] == ""


async def test_temporary_redirect_keeps_method_and_body(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    result = await call(ctx, server.url("/redirect?status=307&to=/echo"), method="PUT", body="payload")
    echoed = json.loads(result["body"])
    assert echoed["method"] == "PUT" and echoed["body"] == "payload"


async def test_credentials_are_dropped_on_a_redirect_to_another_host(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1", "localhost"])
    headers = {"Authorization": "Bearer secret", "X-Keep": "1"}
    same = await call(ctx, server.url("/redirect?to=/echo"), headers=headers)
    assert json.loads(same["body"])["headers"]["Authorization"] == "Bearer secret"
    other = server.url("/echo", host="localhost")
    moved = await call(ctx, server.url(f"/redirect?to={other}"), headers=headers)
    echoed = json.loads(moved["body"])["headers"]
    assert "Authorization" not in echoed and echoed["X-Keep"] == "1"


@pytest.fixture
async def other_origin() -> AsyncIterator[str]:
    """A second loopback server (another port, so another origin) that echoes request headers."""

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"headers": dict(request.headers)})

    app = web.Application()
    app.add_routes([web.get("/echo", echo)])
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/echo"
    finally:
        await runner.cleanup()


SECRET_HEADERS = {
    "Authorization": "Bearer a",
    "Cookie": "sid=b",
    "X-Api-Key": "c",
    "X-Auth-Token": "d",
    "PRIVATE-TOKEN": "e",
    "X-Amz-Security-Token": "f",
    "Ocp-Apim-Subscription-Key": "g",
    "X-Client-Secret": "h",
    "api_key": "i",
}
PLAIN_HEADERS = {"Accept": "application/json", "X-Keep": "1", "X-Monkey": "2", "User-Agent": "talon-test"}


async def test_secret_headers_do_not_follow_a_redirect_to_another_origin(
    server: Server, other_origin: str, tmp_path: Path
) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    headers = {**SECRET_HEADERS, **PLAIN_HEADERS}
    same = await call(ctx, server.url("/redirect?to=/echo"), headers=headers)
    kept = json.loads(same["body"])["headers"]
    assert {n: kept.get(n) for n in headers} == headers  # the same origin gets everything
    moved = await call(ctx, server.url(f"/redirect?status=307&to={other_origin}"), headers=headers)
    assert moved["url"] == other_origin
    received = json.loads(moved["body"])["headers"]
    assert not set(SECRET_HEADERS) & set(received)
    assert {n: received.get(n) for n in PLAIN_HEADERS} == PLAIN_HEADERS


# ---------------------------------------------------------------- allowlist


async def test_host_outside_the_allowlist_is_refused_before_any_lookup(
    server: Server, tmp_path: Path
) -> None:
    ctx = make_ctx(tmp_path, allowed_domains=["example.com"], allowed_private_hosts=["127.0.0.1"])
    with pytest.raises(ToolError, match=r"127\.0\.0\.1 is not in the allowed domains \(example\.com\)"):
        await call(ctx, server.url("/hello"))
    with pytest.raises(ToolError, match="not in the allowed domains"):
        await call(ctx, "https://does-not-exist.invalid/")
    assert server.hits == []


async def test_persona_and_operator_allowlists_are_combined(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(
        tmp_path,
        persona_domains=("localhost",),
        allowed_domains=["example.com"],
        allowed_private_hosts=["localhost"],
    )
    assert (await call(ctx, server.url("/hello", host="localhost")))["body"] == "hello"


async def test_allowlist_does_not_lift_the_private_block(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_domains=["localhost"])
    with pytest.raises(ToolError, match="loopback"):
        await call(ctx, server.url("/hello", host="localhost"))


@pytest.mark.parametrize(
    ("host", "entries", "allowed"),
    [
        ("example.com", ["example.com"], True),
        ("api.example.com", ["example.com"], True),
        ("a.b.example.com", ["example.com"], True),
        ("API.Example.COM.", ["example.com"], True),
        ("api.example.com", ["*.example.com"], True),
        ("api.example.com", [".example.com"], True),
        ("badexample.com", ["example.com"], False),
        ("example.com.evil.net", ["example.com"], False),
        ("example.com", ["api.example.com"], False),
        ("bücher.de", ["xn--bcher-kva.de"], True),
        ("1.2.3.4", ["3.4"], False),
        ("1.2.3.4", ["1.2.3.4"], True),
        ("example.com", [], False),
    ],
)
def test_domain_matching(host: str, entries: list[str], allowed: bool) -> None:
    assert domain_allowed(host, entries) is allowed


# ---------------------------------------------------------------- bodies, limits, arguments


async def test_body_is_cut_at_the_cap(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"], max_response_bytes=1000)
    result = await call(ctx, server.url("/big"))
    assert result["body"] == "a" * 1000
    assert result["truncated"] is True


async def test_binary_bodies_come_back_as_base64(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    result = await call(ctx, server.url("/binary"))
    assert result["bodyEncoding"] == "base64"
    assert base64.b64decode(result["body"]) == bytes(range(256))


async def test_text_is_decoded_with_its_charset(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    assert (await call(ctx, server.url("/latin")))["body"] == "café"


async def test_head_returns_no_body(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    result = await call(ctx, server.url("/hello"), method="HEAD")
    assert result["status"] == 200 and result["body"] == ""


async def test_slow_server_times_out(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    started = time.monotonic()
    with pytest.raises(ToolError, match="within 200 ms"):
        await call(ctx, server.url("/slow"), timeoutMs=200)
    assert time.monotonic() - started < 2


async def test_hop_by_hop_headers_are_stripped(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    headers = {
        "Connection": "X-Private",
        "X-Private": "1",
        "Keep-Alive": "timeout=5",
        "Upgrade": "h2c",
        "Accept": "text/plain",
    }
    result = await call(ctx, server.url("/echo"), method="POST", headers=headers, body="hi")
    echoed = json.loads(result["body"])
    assert echoed["body"] == "hi"
    assert echoed["headers"]["Accept"] == "text/plain"
    for name in ("X-Private", "Keep-Alive", "Upgrade"):
        assert name not in echoed["headers"]


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        ({"method": "TRACE", "url": "https://example.com/"}, "method must be one of"),
        ({"method": "GET"}, "url is required"),
        ({"method": "GET", "url": "ftp://example.com/x"}, "only http: and https:"),
        ({"method": "GET", "url": "file:///etc/passwd"}, "only http: and https:"),
        ({"method": "GET", "url": "javascript:alert(1)"}, "only http: and https:"),
        ({"method": "GET", "url": "/relative/path"}, "only http: and https:"),
        ({"method": "GET", "url": "http://user:pw@example.com/"}, "credentials in the URL"),
        ({"method": "GET", "url": "https://example.com/", "headers": {"Host": "internal"}}, "Host header"),
        ({"method": "GET", "url": "https://example.com/", "headers": {"X-A": "a\r\nX-B: b"}}, "single-line"),
        (
            {"method": "GET", "url": "https://example.com/", "headers": {"Bad Name": "x"}},
            "not a valid HTTP header",
        ),
        ({"method": "GET", "url": "https://example.com/", "headers": ["X-A"]}, "headers must be an object"),
        ({"method": "POST", "url": "https://example.com/", "body": {"a": 1}}, "body must be a string"),
        ({"method": "GET", "url": "https://example.com/", "timeoutMs": 0}, "timeoutMs must be a positive"),
        (
            {"method": "GET", "url": "https://example.com/", "timeoutMs": "fast"},
            "timeoutMs must be a positive",
        ),
    ],
)
async def test_bad_arguments_are_explained(tmp_path: Path, args: dict[str, Any], phrase: str) -> None:
    with pytest.raises(ToolError, match=phrase):
        await net_http.TOOL.handler(make_ctx(tmp_path), args)


async def test_huge_timeout_is_capped_not_refused(server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"])
    assert (await call(ctx, server.url("/hello"), timeoutMs=10**9))["status"] == 200


async def test_unresolvable_host_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"could not resolve does-not-exist\.invalid"):
        await call(make_ctx(tmp_path), "http://does-not-exist.invalid/")


async def test_closed_port_is_reported(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ToolError, match=f"could not connect to 127.0.0.1:{port}"):
        await call(make_ctx(tmp_path, allowed_private_hosts=["127.0.0.1"]), f"http://127.0.0.1:{port}/")


# ---------------------------------------------------------------- the classifier


@pytest.mark.parametrize(
    ("address", "phrase"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.170.2", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.255", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fe80::1%1", "link-local"),
        ("fc00::1", "unique-local"),
        ("fd12:3456::1", "unique-local"),
        ("fd00:ec2::254", "cloud metadata"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("::ffff:127.0.0.1", "loopback address (the IPv4-mapped form of 127.0.0.1)"),
        ("::ffff:10.1.2.3", "private address (the IPv4-mapped form"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("::ffff:0:192.168.0.1", "IPv4-translated form"),
        ("::127.0.0.1", "IPv4-compatible form"),
        ("::10.0.0.1", "IPv4-compatible form"),
        ("64:ff9b::127.0.0.1", "NAT64 form"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata address (the NAT64 form of 169.254.169.254)"),
        ("64:ff9b:1::1", "local-use NAT64"),
        ("2002:7f00:1::", "6to4 form of 127.0.0.1"),
        ("2002:c0a8:101::1", "6to4 form of 192.168.1.1"),
        ("2001::1", "reserved"),
        ("100::1", "discard"),
    ],
)
def test_classifier_blocks(address: str, phrase: str) -> None:
    reason = classify(ipaddress.ip_address(address))
    assert reason is not None and phrase in reason


@pytest.mark.parametrize(
    "address",
    [
        "1.1.1.1",
        "8.8.8.8",
        "172.32.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "2606:4700::1111",
        "::ffff:1.1.1.1",
        "64:ff9b::808:808",
        "2a00:1450::1",
    ],
)
def test_classifier_passes_public_addresses(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("entry", "address"),
    [
        ("169.254.0.0/16", "169.254.169.254"),
        ("169.254.0.0/16", "169.254.170.2"),
        ("169.254.0.0/16", "::ffff:169.254.169.254"),
        ("169.254.0.0/16", "64:ff9b::a9fe:a9fe"),
        ("169.254.0.0/16", "2002:a9fe:a9fe::1"),
        ("0.0.0.0/0", "169.254.169.254"),
        ("::/0", "::ffff:169.254.169.254"),
        ("::/0", "fd00:ec2::254"),
        ("fd00::/8", "fd00:ec2::254"),
        ("100.64.0.0/10", "100.100.100.200"),
        ("192.0.0.0/24", "192.0.0.192"),
        ("metadata.internal", "169.254.169.254"),
        ("metadata.internal", "::ffff:169.254.169.254"),
        ("metadata.internal", "64:ff9b::a9fe:a9fe"),
    ],
)
def test_ranges_and_names_do_not_unblock_metadata(entry: str, address: str) -> None:
    policy = EgressPolicy.build([], [entry])
    why = policy.address_problem("metadata.internal", ipaddress.ip_address(address))
    assert why is not None and "cloud metadata" in why


def test_ranges_and_names_still_unblock_the_rest() -> None:
    by_net = EgressPolicy.build([], ["169.254.0.0/16", "fd00::/8"])
    assert by_net.address_problem("anything", ipaddress.ip_address("169.254.1.1")) is None
    assert by_net.address_problem("anything", ipaddress.ip_address("::ffff:169.254.1.1")) is None
    assert by_net.address_problem("anything", ipaddress.ip_address("fd00::1")) is None
    assert by_net.address_problem("anything", ipaddress.ip_address("10.0.0.1")) == "a private address"
    by_name = EgressPolicy.build([], ["nas.internal"])
    assert by_name.address_problem("nas.internal", ipaddress.ip_address("10.0.0.1")) is None


@pytest.mark.parametrize(
    ("entry", "address"),
    [
        ("169.254.169.254", "169.254.169.254"),
        ("169.254.169.254/32", "169.254.169.254"),
        ("169.254.169.254", "::ffff:169.254.169.254"),
        ("[fd00:ec2::254]", "fd00:ec2::254"),
        ("fd00:ec2::254/128", "fd00:ec2::254"),
    ],
)
def test_an_entry_naming_the_metadata_address_unblocks_it(entry: str, address: str) -> None:
    policy = EgressPolicy.build([], [entry])
    assert policy.address_problem("anything", ipaddress.ip_address(address)) is None
    assert policy.address_problem("anything", ipaddress.ip_address("169.254.170.2")) is not None


def _stub_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    """Answer lookups from ``answers``; nothing leaves the machine."""
    loop = asyncio.get_running_loop()

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("answer", ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"])
async def test_a_name_resolving_to_metadata_stays_blocked_under_a_range_allow(
    monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    # The guard's decision only: it must refuse before anything is pinned for a connection.
    _stub_dns(monkeypatch, {"metadata.test": [answer]})
    shown = re.escape(str(ipaddress.ip_address(answer)))
    policy = EgressPolicy.build([], ["169.254.0.0/16", "fd00::/8", "metadata.test"])
    resolver = egress._PinnedResolver()
    with pytest.raises(
        ToolError, match=rf"blocked: metadata\.test resolves to {shown}, a cloud metadata address"
    ):
        await egress._vet(URL("http://metadata.test/latest/meta-data/"), policy, resolver)
    with pytest.raises(OSError, match="not vetted"):
        await resolver.resolve("metadata.test", 80)
    # Naming the address itself is the way to open it.
    exact = EgressPolicy.build([], [answer])
    await egress._vet(URL("http://metadata.test/latest/meta-data/"), exact, resolver)
    assert [a["host"] for a in await resolver.resolve("metadata.test", 80, socket.AF_UNSPEC)] == [
        str(ipaddress.ip_address(answer))
    ]


async def test_connections_use_only_vetted_addresses() -> None:
    resolver = egress._PinnedResolver()
    resolver.pin("api.example.com", [ipaddress.ip_address("93.184.215.14")])
    answers = await resolver.resolve("API.example.com.", 443, family=socket.AF_UNSPEC)
    assert [a["host"] for a in answers] == ["93.184.215.14"]
    with pytest.raises(OSError, match="not vetted"):
        await resolver.resolve("rebound.example.com", 443)
