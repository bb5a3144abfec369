"""``net_http`` (``net.http:egress``): outbound HTTP(S) requests made by the host.

The arguments are checked here; the request goes through the egress guard of
:mod:`tools.egress`, which vets every hop and connects only to the addresses it vetted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import aiohttp
from yarl import URL

from tools.base import HostTool, ToolContext, ToolError
from tools.egress import Request, describe_failure, egress_policy, request

__all__ = ["TOOL", "check_headers", "http_request"]

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 120_000
# Connection-level headers that must not be forwarded, plus the ones aiohttp computes itself.
_HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade", "content-length",
    }
)  # fmt: skip
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


# ---------------------------------------------------------------- arguments


def _parse(args: Mapping[str, Any]) -> Request:
    method = args.get("method")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ToolError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    raw_url = args.get("url")
    if not isinstance(raw_url, str) or not raw_url.strip():
        raise ToolError("url is required, e.g. https://api.example.com/v1/items")
    try:
        url = URL(raw_url.strip())
    except (ValueError, TypeError) as exc:
        raise ToolError(f"url {raw_url!r} is not a valid URL: {exc}") from None
    headers = check_headers(args.get("headers"))
    body = args.get("body")
    if body is not None and not isinstance(body, str):
        raise ToolError("body must be a string; JSON-encode objects and set a Content-Type header")
    timeout_ms = args.get("timeoutMs", DEFAULT_TIMEOUT_MS)
    if timeout_ms is None:
        timeout_ms = DEFAULT_TIMEOUT_MS
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or not timeout_ms > 0:
        raise ToolError(f"timeoutMs must be a positive number of milliseconds (at most {MAX_TIMEOUT_MS})")
    return Request(
        method=method.upper(),
        url=url,
        headers=headers,
        body=body.encode("utf-8") if body is not None else None,
        timeout=min(float(timeout_ms), MAX_TIMEOUT_MS) / 1000,
    )


def check_headers(raw: Any) -> dict[str, str]:
    """Request headers as sent: names and values checked, Host refused, hop-by-hop ones dropped."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ToolError('headers must be an object of string values, e.g. {"Accept": "application/json"}')
    headers: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ToolError(f"header name {name!r} is not a valid HTTP header name")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ToolError(f"header {name} must have a single-line string value")
        headers[name] = value
    if any(n.lower() == "host" for n in headers):
        raise ToolError("the Host header cannot be set; put the host name in the url")
    dropped = set(_HOP_BY_HOP)
    for name, value in headers.items():
        if name.lower() == "connection":
            dropped.update(v.strip().lower() for v in value.split(","))
    return {n: v for n, v in headers.items() if n.lower() not in dropped}


async def http_request(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Make one HTTP(S) request on the persona's behalf.

    Args:
        ctx (:class:`tools.base.ToolContext`): The calling run; ``ctx.settings.net_http`` and
            ``ctx.persona.allowed_domains`` shape the policy.
        args (:obj:`dict`): ``method``, ``url``, optional ``headers``, ``body``, ``timeoutMs``.

    Returns:
        :obj:`dict`: ``status``, ``headers``, ``body`` (text, or base64 when ``bodyEncoding``
        is ``"base64"``), ``bodyEncoding``, ``truncated`` and the final ``url``.

    Raises:
        :class:`tools.base.ToolError`: The request was refused or failed.
    """
    req = _parse(args)
    settings = ctx.settings.net_http
    policy = egress_policy(ctx)
    try:
        async with asyncio.timeout(req.timeout):
            return await request(req, policy, settings.max_response_bytes)
    except TimeoutError:
        raise ToolError(
            f"no complete response from {req.url.host} within {req.timeout * 1000:g} ms; "
            f"retry with a larger timeoutMs (at most {MAX_TIMEOUT_MS})"
        ) from None
    except aiohttp.ClientError as exc:
        raise ToolError(describe_failure(exc)) from None


TOOL = HostTool(
    mcp_name="net_http",
    internal_name="net.http",
    prefix="net.http",
    description=(
        "Make an HTTP or HTTPS request from the host and return status, headers and body. Only "
        "public addresses are reachable and the operator may limit the allowed domains. Redirects "
        "are followed (at most 5); credential headers are not sent on to another origin; large "
        "bodies are cut and marked truncated."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": list(METHODS)},
            "url": {"type": "string", "description": "An absolute http:// or https:// URL."},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Request headers (Host and hop-by-hop headers are not allowed).",
            },
            "body": {"type": "string", "description": "Request body, sent as UTF-8."},
            "timeoutMs": {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": DEFAULT_TIMEOUT_MS,
                "description": f"Whole-request timeout in milliseconds; capped at {MAX_TIMEOUT_MS}.",
            },
        },
        "required": ["method", "url"],
        "additionalProperties": False,
    },
    handler=http_request,
    timeout=MAX_TIMEOUT_MS / 1000 + 5,
)
