"""The egress guard: where a persona may go over the network, and the one client that goes there.

Every hop (the first request and each redirect) is checked: the scheme must be http or https,
the host must pass the domain allowlist, and every address the host resolves to must pass the
SSRF classifier in :mod:`tools.ssrf`. The connection then goes to exactly the addresses that
were checked: aiohttp gets a resolver that answers only with them, so a second DNS answer can
not redirect it, while TLS SNI, certificate checks and the Host header still use the name.

``net_http`` and ``wait_for`` make their requests with :func:`fetch`; the shell's egress proxy
(:mod:`tools.workspace.egress_proxy`) vets each connection with :func:`vetted_addresses`.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from tools.base import ToolError
from tools.ssrf import EgressPolicy, IPAddress, normalize_host

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from tools.base import ToolContext

__all__ = [
    "Request",
    "Resolve",
    "carries_credentials",
    "decode_body",
    "describe_failure",
    "egress_policy",
    "exchange",
    "fetch",
    "persona_policy",
    "request",
    "vetted_addresses",
]

T = TypeVar("T")

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
# Headers that carry credentials, dropped when a redirect leaves the origin they were meant for:
# the standard ones, and any whose name marks it secret by convention (X-Api-Key, X-Auth-Token,
# PRIVATE-TOKEN, X-Amz-Security-Token, Ocp-Apim-Subscription-Key, X-Hub-Signature-256...).
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})
_SECRET_NAME = re.compile(
    r"auth|token|secret|passw|session|cookie|credential|signature|api[-_]?key|(?:^|[-_])key$", re.IGNORECASE
)
_TEXT_TYPES = frozenset(
    {
        "application/json", "application/xml", "application/javascript", "application/ecmascript",
        "application/x-www-form-urlencoded", "application/graphql", "application/x-ndjson",
        "application/yaml", "application/x-yaml", "application/toml", "image/svg+xml",
    }
)  # fmt: skip
_BINARY_MAJOR = ("image/", "audio/", "video/", "font/")
Resolve = Callable[[str, int], Awaitable[list[IPAddress]]]
_HINT = "ask the operator to add it to net_http.allowed_private_hosts"


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the guarded client makes it."""

    method: str
    url: URL
    headers: dict[str, str]
    body: bytes | None
    timeout: float


class _PinnedResolver(AbstractResolver):
    """Answers aiohttp's lookups with the addresses that were vetted, and nothing else."""

    def __init__(self) -> None:
        self._pinned: dict[str, list[IPAddress]] = {}

    def pin(self, host: str, addresses: list[IPAddress]) -> None:
        self._pinned[normalize_host(host)] = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self._pinned.get(normalize_host(host))
        if not addresses:
            raise OSError(f"{host} was not vetted for this request")
        return [
            ResolveResult(
                hostname=host,
                host=str(a),
                port=port,
                family=socket.AF_INET6 if a.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
            )
            for a in addresses
            if family in (socket.AF_UNSPEC, socket.AF_INET6 if a.version == 6 else socket.AF_INET)
        ]

    async def close(self) -> None:
        self._pinned.clear()


# ---------------------------------------------------------------- vetting


async def _vet(url: URL, policy: EgressPolicy, resolver: _PinnedResolver) -> None:
    """Check scheme, allowlist and addresses of ``url``; pin the vetted addresses."""
    if url.scheme not in ("http", "https"):
        raise ToolError(
            f"only http: and https: URLs are allowed; got {url.scheme or 'no scheme'!r} in {str(url)!r}"
        )
    if not url.raw_host:
        raise ToolError(f"url {str(url)!r} has no host")
    if url.raw_user is not None or url.raw_password is not None:
        raise ToolError("credentials in the URL are not allowed; send them in an Authorization header")
    resolver.pin(url.raw_host, await vetted_addresses(url.raw_host, url.port or 0, policy))


async def vetted_addresses(
    host: str, port: int, policy: EgressPolicy, *, resolve: Resolve | None = None
) -> list[IPAddress]:
    """The addresses of ``host`` if the domain allowlist and every address pass ``policy``.

    ``resolve`` (host, port) -> addresses replaces the system resolver (tests answer with it).

    Raises:
        :class:`tools.base.ToolError`: The host is not allowed, does not resolve, or one of its
            addresses is blocked; the message says which and what the operator can change.
    """
    if not policy.host_allowed(host):
        raise ToolError(
            f"blocked: {normalize_host(host)} is not in the allowed domains ({', '.join(policy.domains)}); "
            "ask the operator to add it to net_http.allowed_domains in talon.yaml or to the persona's "
            "net_http.allowed_domains"
        )
    addresses = await (resolve or _resolve)(host, port)
    for addr in addresses:
        why = policy.address_problem(host, addr)
        if why:
            if _literal(host) is not None:
                raise ToolError(f"blocked: {addr} is {why}; {_HINT}")
            raise ToolError(f"blocked: {normalize_host(host)} resolves to {addr}, {why}; {_HINT}")
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.replace("%25", "%"))
    except ValueError:
        return None


async def _resolve(host: str, port: int) -> list[IPAddress]:
    literal = _literal(host)
    if literal is not None:
        return [literal]
    if host.replace(".", "").isdigit() or ":" in host:
        # aiohttp would treat this as an address and connect without our resolver.
        raise ToolError(f"{host!r} is not a standard IP address; write IPv4 as a.b.c.d or use a host name")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolError(f"could not resolve {host}: {exc}; check the host name") from None
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        addr = ipaddress.ip_address(str(sockaddr[0]))
        if addr not in found:
            found.append(addr)
    if not found:
        raise ToolError(f"could not resolve {host}: no addresses")
    return found


# ---------------------------------------------------------------- the request


def _redirect(method: str, status: int, body: bytes | None) -> tuple[str, bytes | None]:
    """The method and body for the next hop, as browsers do it."""
    if status == 303 and method != "HEAD":
        return "GET", None
    if status in (301, 302) and method == "POST":
        return "GET", None
    return method, body


def carries_credentials(name: str) -> bool:
    """Whether the header ``name`` carries credentials (Authorization, Cookie, X-Api-Key, ...)."""
    return name.lower() in _CREDENTIALS or _SECRET_NAME.search(name) is not None


def _origin(url: URL) -> tuple[str, str, int | None]:
    return url.scheme, normalize_host(url.raw_host or ""), url.port


async def request(req: Request, policy: EgressPolicy, cap: int) -> dict[str, Any]:
    """``req`` with every hop vetted under ``policy``; the body cut at ``cap`` bytes."""

    async def consume(resp: aiohttp.ClientResponse) -> dict[str, Any]:
        data, truncated = await _read(resp, cap) if resp.method != "HEAD" else (b"", False)
        return _result(resp, data, truncated)

    return await exchange(req, policy, consume)


async def exchange(
    req: Request, policy: EgressPolicy, consume: Callable[[aiohttp.ClientResponse], Awaitable[T]]
) -> T:
    """``req`` with every hop vetted under ``policy``; ``consume`` reads the final response.

    Redirects are followed (at most :data:`MAX_REDIRECTS`), credential headers dropped when a
    hop leaves their origin; ``consume`` gets the first response that is not a redirect.
    """
    resolver = _PinnedResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=4)
    async with aiohttp.ClientSession(
        connector=connector,
        trust_env=False,  # never through a proxy from the environment
        cookie_jar=aiohttp.DummyCookieJar(),
        timeout=aiohttp.ClientTimeout(total=None),
    ) as session:
        method, url, body, headers = req.method, req.url, req.body, dict(req.headers)
        for _hop in range(MAX_REDIRECTS + 1):
            await _vet(url, policy, resolver)
            async with session.request(
                method, url, headers=headers, data=body, allow_redirects=False
            ) as resp:
                location = resp.headers.get("Location")
                if resp.status not in _REDIRECTS or location is None:
                    return await consume(resp)
                try:
                    target = resp.url.join(URL(location))
                except ValueError:
                    raise ToolError(f"{url} redirected to an invalid URL {location!r}") from None
            if _origin(target) != _origin(url):
                headers = {n: v for n, v in headers.items() if not carries_credentials(n)}
            method, body = _redirect(method, resp.status, body)
            url = target
    raise ToolError(f"stopped after {MAX_REDIRECTS} redirects; the last pointed to {url}")


async def _read(resp: aiohttp.ClientResponse, cap: int) -> tuple[bytes, bool]:
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        room = cap - len(buf)
        if len(chunk) > room:
            buf.extend(chunk[:room])
            return bytes(buf), True
        buf.extend(chunk)
    return bytes(buf), False


def _result(resp: aiohttp.ClientResponse, data: bytes, truncated: bool) -> dict[str, Any]:
    headers: dict[str, str] = {}
    for name, value in resp.headers.items():
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    text = decode_body(data, resp.content_type, resp.charset, truncated)
    result: dict[str, Any] = {"status": resp.status, "headers": headers}
    if text is None:
        result.update(body=base64.b64encode(data).decode("ascii"), bodyEncoding="base64")
    else:
        result.update(body=text, bodyEncoding="text")
    result.update(truncated=truncated, url=str(resp.url))
    return result


def decode_body(data: bytes, content_type: str, charset: str | None, truncated: bool) -> str | None:
    """The body as text, or ``None`` when it is binary and should be sent as base64 (``truncated``:
    the body was cut, perhaps inside its last character)."""
    ctype = content_type.lower()
    if (ctype.startswith(_BINARY_MAJOR) and ctype not in _TEXT_TYPES) or ctype == "application/octet-stream":
        return None
    if ctype.startswith("text/") or ctype in _TEXT_TYPES or ctype.endswith(("+json", "+xml")):
        try:
            codec = codecs.lookup(charset or "utf-8").name
        except LookupError:
            codec = "utf-8"
        return data.decode(codec, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cut in the middle of the last character is not binary content.
        if truncated and exc.start >= len(data) - 3:
            try:
                return data[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                return None
        return None


def describe_failure(exc: aiohttp.ClientError) -> str:
    """What went wrong with a request, in words the model can act on."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"the TLS certificate of {exc.host} was not accepted: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"TLS with {exc.host} failed: {exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"could not connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc}"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"the response body could not be read: {exc}"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"the server sent an invalid response: {exc.message}"
    return f"the request failed: {exc}"


def egress_policy(ctx: ToolContext) -> EgressPolicy:
    """Where the calling persona may go: net_http's allowlists of talon.yaml and persona.yaml."""
    return persona_policy(ctx.settings, ctx.persona)


def persona_policy(settings: Settings, persona: Persona) -> EgressPolicy:
    """Where ``persona`` may go under ``settings`` (see :func:`egress_policy`)."""
    net = settings.net_http
    return EgressPolicy.build([*net.allowed_domains, *persona.allowed_domains], net.allowed_private_hosts)


async def fetch(method: str, url: URL, policy: EgressPolicy, cap: int) -> dict[str, Any]:
    """One request as net_http makes it (every hop vetted under ``policy``), without headers or
    body; the result as net_http returns it, the body cut at ``cap`` bytes.

    Raises:
        :class:`tools.base.ToolError`: The guard refused a hop, or the host did not resolve.
        :class:`aiohttp.ClientError`: The request failed.
    """
    return await request(Request(method, url, {}, None, 0.0), policy, cap)
