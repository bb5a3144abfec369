"""``web_request`` (``net.http:egress``): a structured HTTP request on the persona's behalf.

It goes through the egress guard of :mod:`tools.egress`, as ``net_http`` does: the persona's
domain allowlist, every address checked, the connection pinned to them, every redirect hop
checked again. GET, HEAD and OPTIONS are retried on transient network failures
(:mod:`tools.web.retry`); other methods never are.

``credential`` names an environment variable the persona may use (``credentials`` in
persona.yaml); its value goes out as ``Authorization: Bearer`` and nowhere else: it is masked in
the result (headers and body) and the audit log holds the argument names only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from gateway import jsonsafe
from tools.base import HostTool, ToolContext, ToolError
from tools.egress import Request, carries_credentials, decode_body, describe_failure, egress_policy, exchange
from tools.host.net_http import check_headers
from tools.web.body import Body, head_tail_text, read_body
from tools.web.retry import IDEMPOTENT, with_retries

__all__ = ["MASK", "TOOL", "filter_headers", "web_request"]

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 120_000
DEFAULT_MAX_RESPONSE_BYTES = 100_000
MAX_RESPONSE_BYTES = 1_000_000
MAX_BODY_BYTES = 1_000_000
MAX_HEADERS = 100
MAX_HEADER_CHARS = 2_000
MASK = "[credential]"
# Response headers that set or carry credentials; WWW-Authenticate only names a scheme.
_DROPPED = frozenset({"set-cookie", "set-cookie2"})
_KEPT = frozenset({"www-authenticate", "proxy-authenticate"})
_HINT = "ask for a narrower resource (a page, a filter, a range) or raise max_response_bytes"


@dataclass(frozen=True, slots=True)
class _Call:
    request: Request
    max_bytes: int
    credential: str | None
    secret: str | None
    body_ignored: bool


@dataclass(frozen=True, slots=True)
class _Response:
    status: int
    headers: CIMultiDictProxy[str]
    content_type: str
    charset: str | None
    url: str
    body: Body


# ---------------------------------------------------------------- arguments


def _parse(ctx: ToolContext, args: Mapping[str, Any]) -> _Call:
    method = str(args["method"]).upper()
    url = _url(args["url"])
    headers = check_headers(args.get("headers"))
    body, body_ignored = _body(method, args, headers)
    credential = args.get("credential")
    secret = None
    if credential is not None:
        secret = _credential(ctx, credential, headers)
        headers["Authorization"] = f"Bearer {secret}"
    timeout_ms = args.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    return _Call(
        Request(method, url, headers, body, float(timeout_ms) / 1000),
        int(args.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)),
        credential,
        secret,
        body_ignored,
    )


def _url(raw: str) -> URL:
    try:
        url = URL(raw.strip())
    except (ValueError, TypeError) as exc:
        raise ToolError(f"url is not a valid URL ({exc}); send an absolute https:// URL") from None
    if url.scheme not in ("http", "https") or not url.raw_host:
        raise ToolError(
            "url must be an absolute http:// or https:// URL, e.g. https://api.example.com/v1/items"
        )
    return url


def _body(method: str, args: Mapping[str, Any], headers: dict[str, str]) -> tuple[bytes | None, bool]:
    """The encoded request body (objects as JSON, strings as text) and whether it was ignored."""
    if "body" not in args or args["body"] is None:
        return None, False
    if method in IDEMPOTENT:
        return None, True
    value = args["body"]
    explicit = any(n.lower() == "content-type" for n in headers)
    if isinstance(value, str):
        data, ctype = value.encode("utf-8"), "text/plain; charset=utf-8"
    else:
        data, ctype = json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json"
    if len(data) > MAX_BODY_BYTES:
        raise ToolError(f"body is {len(data):,} bytes; at most {MAX_BODY_BYTES:,} can be sent")
    if not explicit:
        headers["Content-Type"] = ctype
    return data, False


def _credential(ctx: ToolContext, name: str, headers: Mapping[str, str]) -> str:
    allowed = ctx.persona.credentials
    if name not in allowed:
        listed = ", ".join(allowed) if allowed else "none"
        raise ToolError(
            f"credential {name!r} is not one this persona may use (allowed: {listed}); the operator "
            "lists them under credentials in persona.yaml"
        )
    if any(n.lower() == "authorization" for n in headers):
        raise ToolError("credential cannot be combined with an Authorization header; send one or the other")
    value = os.environ.get(name)
    if not value:
        raise ToolError(f"the environment variable {name} is not set; ask the operator to set it")
    return value


# ---------------------------------------------------------------- the result


def filter_headers(headers: CIMultiDictProxy[str], secret: str | None = None) -> dict[str, str]:
    """Response headers without cookies and credential-bearing ones, repeated names joined,
    bounded in number and size, ``secret`` masked."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in _DROPPED or (low not in _KEPT and carries_credentials(name)):
            continue
        if name not in out and len(out) >= MAX_HEADERS:
            continue
        value = _mask(value, secret)[:MAX_HEADER_CHARS]
        out[name] = f"{out[name]}, {value}"[:MAX_HEADER_CHARS] if name in out else value
    return out


def _mask(text: str, secret: str | None) -> str:
    return text.replace(secret, MASK) if secret else text


def _result(call: _Call, resp: _Response, elapsed: float, attempts: int) -> dict[str, Any]:
    body = resp.body
    secret = call.secret
    data = body.data if secret is None else body.data.replace(secret.encode(), MASK.encode())
    text = decode_body(data, resp.content_type, resp.charset, not body.whole)
    result: dict[str, Any] = {"status": resp.status, "headers": filter_headers(resp.headers, secret)}
    if text is None:
        result.update(body=base64.b64encode(body.head).decode("ascii"), body_format="base64")
    elif body.whole:
        parsed = _json(text, resp.content_type)
        if parsed is not _NOT_JSON:
            result.update(body=parsed, body_format="json")
        else:
            result.update(body=_mask(text, secret), body_format="text")
    else:
        head = decode_body(body.head, resp.content_type, resp.charset, True) or ""
        tail_bytes = body.tail.lstrip(_CONTINUATION)  # the tail may start inside a character
        tail = decode_body(tail_bytes, resp.content_type, resp.charset, True) or ""
        left_out = body.total - len(body.head) - len(body.tail)
        view = head_tail_text(head, tail, left_out, body.total, complete=body.complete, hint=_HINT)
        result.update(body=_mask(view, secret), body_format="text")
    result.update(
        truncated=not body.whole,
        bytes=body.total,
        timing_ms=round(elapsed * 1000),
        url=_mask(resp.url, secret),
    )
    if attempts > 1:
        result["attempts"] = attempts
    if call.credential:
        result["credential"] = call.credential
    if call.body_ignored:
        result["note"] = f"body was not sent: {call.request.method} requests carry none"
    return result


_NOT_JSON = object()
_CONTINUATION = bytes(range(0x80, 0xC0))


def _json(text: str, content_type: str) -> Any:
    ctype = content_type.lower()
    if not (ctype == "application/json" or ctype.endswith("+json")):
        return _NOT_JSON
    try:
        return jsonsafe.loads(text, max_bytes=MAX_RESPONSE_BYTES * 4)
    except jsonsafe.JSONInputError:
        return _NOT_JSON


# ---------------------------------------------------------------- the call


async def web_request(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Make one HTTP(S) request through the egress guard.

    Returns:
        :obj:`dict`: ``status``, ``headers``, ``body`` (parsed JSON, text, or base64 per
        ``body_format``), ``truncated``, ``bytes``, ``timing_ms`` and the final ``url``.

    Raises:
        :class:`tools.base.ToolError`: Bad arguments, a refusal of the guard, or a failure.
    """
    call = _parse(ctx, args)
    req = call.request
    policy = egress_policy(ctx)

    async def consume(resp: aiohttp.ClientResponse) -> _Response:
        body = await read_body(resp, call.max_bytes) if resp.method != "HEAD" else Body(b"", b"", 0, True)
        return _Response(resp.status, resp.headers, resp.content_type, resp.charset, str(resp.url), body)

    started = time.perf_counter()
    try:
        async with asyncio.timeout(req.timeout):
            resp, attempts = await with_retries(req.method, lambda: exchange(req, policy, consume))
    except TimeoutError:
        raise ToolError(
            f"no complete response from {req.url.host} within {req.timeout * 1000:g} ms; "
            f"retry with a larger timeout_ms (at most {MAX_TIMEOUT_MS})"
        ) from None
    except aiohttp.ClientError as exc:
        message = _mask(describe_failure(exc), call.secret)
        if req.method not in IDEMPOTENT:
            message += f"; {req.method} is not retried automatically: it may have taken effect, check before repeating"
        raise ToolError(message) from None
    return _result(call, resp, time.perf_counter() - started, attempts)


TOOL = HostTool(
    mcp_name="web_request",
    internal_name="web.request",
    prefix="net.http",
    description=(
        "Make a structured HTTP request. Returns status, filtered headers (no cookies or credentials), "
        "body and timing_ms, plus truncated: true when the body was larger than max_response_bytes "
        "(then a head-and-tail text view). Whole JSON responses are parsed. Objects and arrays in "
        "body are sent as JSON, strings as text/plain; an explicit Content-Type wins; GET, HEAD and "
        "OPTIONS send no body. Only public addresses and the operator's allowed domains are "
        "reachable; every redirect hop is checked. GET, HEAD and OPTIONS are retried on transient "
        "network failures; POST, PUT, PATCH and DELETE never are, since they may have taken effect "
        "before a response was lost. credential names an environment variable listed under "
        "credentials in persona.yaml; its value is sent as a Bearer token and never shown."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 8192,
                "description": "Absolute http(s) URL.",
            },
            "method": {"type": "string", "enum": list(METHODS)},
            "body": {
                "description": "Request body: objects and arrays are sent as JSON, strings as text/plain."
            },
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Request headers (Host and hop-by-hop headers are not allowed).",
            },
            "timeout_ms": {
                "type": "number",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "default": DEFAULT_TIMEOUT_MS,
                "description": f"Whole-request timeout in ms, retries included (at most {MAX_TIMEOUT_MS}).",
            },
            "max_response_bytes": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESPONSE_BYTES,
                "default": DEFAULT_MAX_RESPONSE_BYTES,
                "description": "Response body bytes returned whole; past it a head-and-tail view.",
            },
            "credential": {
                "type": "string",
                "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                "maxLength": 128,
                "description": "Name of an environment variable (from the persona's credentials) sent as a "
                "Bearer token. Cannot be combined with an Authorization header.",
            },
        },
        "required": ["url", "method"],
        "additionalProperties": False,
    },
    handler=web_request,
    timeout=MAX_TIMEOUT_MS / 1000 + 5,
)
