"""web_request against local servers: JSON, head-and-tail, retries, credentials, the guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.unit.tools.web.conftest import Dropper, Site, make_ctx, stub_dns
from tools.base import ToolContext, ToolError
from tools.web import web_request
from tools.web.body import READ_CEILING
from tools.web.retry import ATTEMPTS

TOKEN = "tok-3f9a1c77e2b54d0e"


async def call(ctx: ToolContext, url: str, method: str = "GET", **extra: Any) -> dict[str, Any]:
    return await web_request.TOOL.handler(ctx, {"url": url, "method": method, **extra})


async def test_whole_json_is_parsed(site: Site, tmp_path: Path) -> None:
    async def items(request: web.Request) -> web.Response:
        return web.json_response({"items": [{"id": 1, "name": "mill"}], "next": None})

    site.routes["/items"] = items
    result = await call(make_ctx(tmp_path), site.url("/items"))
    assert result["status"] == 200
    assert result["body_format"] == "json"
    assert result["body"] == {"items": [{"id": 1, "name": "mill"}], "next": None}
    assert result["truncated"] is False
    assert isinstance(result["timing_ms"], int)


async def test_json_past_the_cap_is_a_head_and_tail_text_view(site: Site, tmp_path: Path) -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(20_000)]

    async def big(request: web.Request) -> web.Response:
        return web.json_response({"rows": rows, "end": "LAST-ROW-MARKER"})

    site.routes["/big"] = big
    result = await call(make_ctx(tmp_path), site.url("/big"), max_response_bytes=10_000)
    total = len(json.dumps({"rows": rows, "end": "LAST-ROW-MARKER"}).encode())
    assert result["truncated"] is True
    assert result["body_format"] == "text"
    assert result["bytes"] == total
    body = result["body"]
    assert body.startswith('{"rows": [{"id": 0')
    assert body.rstrip().endswith('"end": "LAST-ROW-MARKER"}')
    assert f"{total - 10_000:,} bytes left out; {total:,} in all" in body
    assert len(body.encode()) < 10_000 + 400


async def test_an_endless_body_stops_at_the_ceiling(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.web.body.READ_CEILING", 1_000_000)

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.content_type = "text/plain"
        await resp.prepare(request)
        for _ in range(10_000):  # bounded: 640 MB if the client never stopped
            await resp.write(b"x" * 65536)
        return resp

    site.routes["/endless"] = endless
    result = await call(make_ctx(tmp_path), site.url("/endless"), max_response_bytes=1000)
    assert result["truncated"] is True
    assert "reading stopped after" in result["body"]
    assert result["bytes"] < 2_000_000
    assert READ_CEILING > 1_000_000  # the real ceiling is larger than the one this test uses


async def test_a_trickling_server_is_cut_off_by_the_timeout(site: Site, tmp_path: Path) -> None:
    async def trickle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for _ in range(200):  # at most 20 s
            await resp.write(b".")
            await asyncio.sleep(0.1)
        return resp

    site.routes["/trickle"] = trickle
    with pytest.raises(ToolError, match=r"no complete response from 127\.0\.0\.1 within 500 ms"):
        await call(make_ctx(tmp_path), site.url("/trickle"), timeout_ms=500)


async def test_post_is_never_retried_when_the_connection_drops(
    dropper: Callable[[int], Any], tmp_path: Path
) -> None:
    server: Dropper = await dropper(1)
    with pytest.raises(ToolError, match=r"POST is not retried automatically: it may have taken effect"):
        await call(make_ctx(tmp_path), f"http://127.0.0.1:{server.port}/orders", "POST", body={"qty": 1})
    assert server.requests == 1


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
async def test_idempotent_requests_are_retried_after_a_drop(
    dropper: Callable[[int], Any], tmp_path: Path, method: str
) -> None:
    # aiohttp itself sends an idempotent request once more when its connection drops; two drops
    # in a row need the tool's own retry.
    server: Dropper = await dropper(2)
    result = await call(make_ctx(tmp_path), f"http://127.0.0.1:{server.port}/status", method)
    assert result["status"] == 200
    assert result["attempts"] == 2
    assert server.requests == 3


async def test_retries_give_up_after_three_attempts(dropper: Callable[[int], Any], tmp_path: Path) -> None:
    server: Dropper = await dropper(10)
    with pytest.raises(ToolError, match="Server disconnected"):
        await call(make_ctx(tmp_path), f"http://127.0.0.1:{server.port}/status")
    assert server.requests == 2 * ATTEMPTS  # each attempt, and aiohttp's one resend of it


async def test_the_credential_goes_out_as_a_bearer_token_and_never_comes_back(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILLS_API_TOKEN", TOKEN)

    async def whoami(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        return web.json_response(
            {"you_sent": auth, "token": auth.removeprefix("Bearer ")},
            headers={"X-Echo": auth, "Set-Cookie": "sid=abc", "WWW-Authenticate": 'Bearer realm="mills"'},
        )

    site.routes["/whoami"] = whoami
    ctx = make_ctx(tmp_path, credentials=("MILLS_API_TOKEN",))
    result = await call(ctx, site.url("/whoami"), credential="MILLS_API_TOKEN")
    assert site.seen_headers[-1]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps(result)
    assert result["body"] == {"you_sent": "Bearer [credential]", "token": "[credential]"}
    assert result["headers"]["X-Echo"] == "Bearer [credential]"
    assert "Set-Cookie" not in result["headers"]
    assert result["headers"]["WWW-Authenticate"] == 'Bearer realm="mills"'
    assert result["credential"] == "MILLS_API_TOKEN"


async def test_a_credential_the_persona_may_not_use_is_refused(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTHER_TOKEN", TOKEN)
    ctx = make_ctx(tmp_path, credentials=("MILLS_API_TOKEN",))
    with pytest.raises(
        ToolError,
        match=r"credential 'OTHER_TOKEN' is not one this persona may use \(allowed: MILLS_API_TOKEN\)",
    ):
        await call(ctx, site.url("/whoami"), credential="OTHER_TOKEN")
    assert site.hits == []


async def test_an_unset_credential_and_an_explicit_authorization_are_errors(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MILLS_API_TOKEN", raising=False)
    ctx = make_ctx(tmp_path, credentials=("MILLS_API_TOKEN",))
    with pytest.raises(ToolError, match="MILLS_API_TOKEN is not set"):
        await call(ctx, site.url("/whoami"), credential="MILLS_API_TOKEN")
    monkeypatch.setenv("MILLS_API_TOKEN", TOKEN)
    with pytest.raises(ToolError, match="cannot be combined with an Authorization header"):
        await call(
            ctx, site.url("/whoami"), credential="MILLS_API_TOKEN", headers={"authorization": "Basic x"}
        )
    assert site.hits == []


async def test_bodies_are_encoded_by_type_and_ignored_for_get(site: Site, tmp_path: Path) -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"type": request.content_type, "body": await request.text()})

    site.routes["/echo"] = echo
    ctx = make_ctx(tmp_path)
    sent = await call(ctx, site.url("/echo"), "POST", body={"a": [1, "é"]})
    assert sent["body"] == {"type": "application/json", "body": '{"a": [1, "é"]}'}
    text = await call(ctx, site.url("/echo"), "PUT", body="plain words")
    assert text["body"] == {"type": "text/plain", "body": "plain words"}
    forced = await call(
        ctx, site.url("/echo"), "PATCH", body="<a/>", headers={"Content-Type": "application/xml"}
    )
    assert forced["body"]["type"] == "application/xml"
    ignored = await call(ctx, site.url("/echo"), "GET", body={"a": 1})
    assert ignored["body"]["body"] == ""
    assert "body was not sent" in ignored["note"]


async def test_the_guard_refuses_a_private_address_without_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = stub_dns(monkeypatch, {"intranet.test": ["10.1.2.3"], "meta.test": ["169.254.169.254"]})
    ctx = make_ctx(tmp_path, private=())
    with pytest.raises(
        ToolError, match=r"blocked: intranet\.test resolves to 10\.1\.2\.3, a private address"
    ):
        await call(ctx, "http://intranet.test/admin")
    with pytest.raises(ToolError, match="a cloud metadata address"):
        await call(ctx, "http://meta.test/latest/meta-data/")
    assert asked == ["intranet.test", "meta.test"]


async def test_a_redirect_to_a_private_address_is_refused(site: Site, tmp_path: Path) -> None:
    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://10.0.0.7/secrets")

    site.routes["/away"] = away
    with pytest.raises(ToolError, match=r"10\.0\.0\.7 is a private address"):
        await call(make_ctx(tmp_path), site.url("/away"))
    assert site.hits == ["/away"]


async def test_a_redirect_loop_stops(site: Site, tmp_path: Path) -> None:
    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    site.routes["/loop"] = loop
    with pytest.raises(ToolError, match="stopped after 5 redirects"):
        await call(make_ctx(tmp_path), site.url("/loop"))
    assert len(site.hits) == 6


async def test_the_persona_allowlist_applies(site: Site, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, allowed_domains=("api.example.com",))
    with pytest.raises(ToolError, match=r"127\.0\.0\.1 is not in the allowed domains \(api\.example\.com\)"):
        await call(ctx, site.url("/items"))
    assert site.hits == []


async def test_the_credential_is_not_sent_on_to_another_origin(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILLS_API_TOKEN", TOKEN)

    async def hop(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://localhost:{site.port}/landing")

    async def landing(request: web.Request) -> web.Response:
        return web.json_response({"auth": request.headers.get("Authorization")})

    site.routes["/hop"] = hop
    site.routes["/landing"] = landing
    ctx = make_ctx(tmp_path, private=("127.0.0.1", "localhost", "::1"), credentials=("MILLS_API_TOKEN",))
    result = await call(ctx, site.url("/hop"), credential="MILLS_API_TOKEN")
    assert result["body"] == {"auth": None}
