"""Guarded egress for the shell: an HTTP proxy that lets a sandbox reach only what net_http may.

With ``shell.network: guarded`` a ``bash`` or ``wait_for`` command gets no network of its
own; it gets this proxy, one per call, on a Unix socket in a private directory bound into
the sandbox (see :mod:`tools.workspace.egress_forward` for the sandbox's end). Every
connection names its destination, which passes the same checks as ``net_http``
(:func:`tools.egress.vetted_addresses`: domain allowlist, then every address the name
resolves to) before the proxy connects, to exactly the vetted addresses:

- ``CONNECT host:port`` opens a tunnel (HTTPS, or anything else over TCP);
- a request with an absolute ``http://`` target is sent on to that host, with the proxy's
  own headers removed and ``Connection: close``, so one connection reaches one vetted host.

A refused destination gets ``403`` with the guard's reason in the body (``curl`` and other
clients show it), an unreachable one ``502``. Heads are bounded in size and time, and the
number of open connections per call is capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from yarl import URL

from gateway.sandbox import Mount
from tools.base import ToolError
from tools.egress import Resolve, vetted_addresses
from tools.ssrf import EgressPolicy, IPAddress

__all__ = ["INSIDE", "PROXY_PORT", "GuardedEgress"]

log = logging.getLogger(__name__)

INSIDE = "/run/talon-egress"  # where the sandbox sees the proxy's directory
PROXY_PORT = 3128
MAX_HEAD_BYTES = 16 * 1024
HEAD_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 32
_CHUNK = 64 * 1024
_SOCKET = "proxy.sock"
_FORWARDER = Path(__file__).with_name("egress_forward.py")
_TOO_LONG = f"the request head is over {MAX_HEAD_BYTES} bytes"
_DROPPED = frozenset({b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"})


class _Refused(Exception):
    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail = status, reason, detail


@dataclass(slots=True)
class GuardedEgress:
    """The proxy of one sandboxed call: created with the command, served while it runs.

    Attributes:
        policy (:class:`tools.ssrf.EgressPolicy`): Where the call may go.
        folder (:class:`pathlib.Path`): The private directory bound at :data:`INSIDE`.
    """

    policy: EgressPolicy
    folder: Path
    resolve: Resolve | None = None
    _server: asyncio.AbstractServer | None = None
    _slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CONNECTIONS))
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @classmethod
    def create(cls, policy: EgressPolicy, *, resolve: Resolve | None = None) -> GuardedEgress:
        """A private directory holding the forwarder script; the socket appears at :meth:`start`."""
        folder = Path(tempfile.mkdtemp(prefix="talon-egress-"))
        shutil.copyfile(_FORWARDER, folder / _FORWARDER.name)
        return cls(policy, folder, resolve)

    @property
    def mount(self) -> Mount:
        # Read-only: the sandbox can connect to the socket but not replace it.
        return Mount(str(self.folder), INSIDE, writable=False)

    def wrap(self, python: str, argv: list[str]) -> list[str]:
        """``argv`` started behind the forwarder (run by ``python``, visible in the sandbox)."""
        script = f"{INSIDE}/{_FORWARDER.name}"
        return [python, "-I", "-S", script, f"{INSIDE}/{_SOCKET}", str(PROXY_PORT), "--", *argv]

    @staticmethod
    def environment() -> dict[str, str]:
        """The proxy variables the sandbox's programs read (both spellings; none bypassed)."""
        url = f"http://127.0.0.1:{PROXY_PORT}"
        names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        return {**{n: url for n in names}, **{n.lower(): url for n in names}}

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(
            self._accept, path=str(self.folder / _SOCKET), limit=MAX_HEAD_BYTES
        )

    async def start_loopback(self) -> int:
        """Serve on a port of 127.0.0.1 instead of the socket (the browser's proxy); the port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=MAX_HEAD_BYTES)
        return int(self._server.sockets[0].getsockname()[1])

    def discard(self) -> None:
        """Remove the directory of a proxy that was never started."""
        shutil.rmtree(self.folder, ignore_errors=True)

    async def close(self) -> None:
        """Stop serving, end every open connection and remove the directory."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(shutil.rmtree, self.folder, True)

    # ------------------------------------------------------------ connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._slots.locked():
            await _answer(writer, _Refused(503, "Service Unavailable", "too many open connections"))
            return
        self._tasks.add(task)
        try:
            async with self._slots:
                await self._serve(reader, writer)
        except asyncio.CancelledError:
            # close() ends open tunnels; a connection task that ends cancelled makes asyncio's
            # stream callback log a spurious error.
            return
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            method, target, lines = _parse_head(head)
            host, port, first = _destination(method, target, lines)
            upstream_r, upstream_w = await self._open(host, port)
        except _Refused as refused:
            await _answer(writer, refused)
            return
        except asyncio.LimitOverrunError:
            await _answer(writer, _Refused(431, "Request Header Fields Too Large", _TOO_LONG))
            return
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return
        try:
            if first is None:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                upstream_w.write(first)
            await asyncio.gather(_pump(reader, upstream_w), _pump(upstream_r, writer))
        finally:
            upstream_w.close()

    async def _open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                addresses = await vetted_addresses(host, port, self.policy, resolve=self.resolve)
        except ToolError as exc:
            log.info("shell egress refused", extra={"host": host, "port": port, "reason": str(exc)})
            raise _Refused(403, "Forbidden", str(exc)) from None
        except TimeoutError:
            raise _Refused(
                504, "Gateway Timeout", f"{host} did not resolve within {CONNECT_TIMEOUT:g} s"
            ) from None
        return await _connect(host, port, addresses)


async def _connect(
    host: str, port: int, addresses: list[IPAddress]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of ``addresses`` that answers (the vetted ones, no lookup)."""
    problem = "no addresses"
    for addr in addresses:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                return await asyncio.open_connection(str(addr), port, limit=_CHUNK)
        except (OSError, TimeoutError) as exc:
            problem = f"{addr}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else 'timed out'}"
    raise _Refused(502, "Bad Gateway", f"could not connect to {host}:{port} ({problem})")


def _parse_head(head: bytes) -> tuple[str, str, list[bytes]]:
    if len(head) > MAX_HEAD_BYTES:
        raise _Refused(431, "Request Header Fields Too Large", _TOO_LONG)
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _Refused(400, "Bad Request", "not an HTTP/1.x proxy request")
    return parts[0].decode("latin-1"), parts[1].decode("latin-1"), lines


def _destination(method: str, target: str, lines: list[bytes]) -> tuple[str, int, bytes | None]:
    """Host and port to reach, and the bytes to send first (``None`` for a tunnel)."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise _Refused(400, "Bad Request", f"CONNECT needs host:port; got {target!r}")
        return host.strip("[]"), int(port), None
    try:
        url = URL(target)
    except ValueError:
        url = URL()
    if url.scheme != "http" or not url.raw_host:
        raise _Refused(
            400,
            "Bad Request",
            "send an absolute http:// URL, or CONNECT host:port for https and other protocols",
        )
    origin = url.raw_path_qs or "/"
    kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROPPED]
    head = b"\r\n".join([f"{method} {origin} HTTP/1.1".encode("latin-1"), *kept, b"Connection: close"])
    return url.raw_host, url.port or 80, head + b"\r\n\r\n"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _answer(writer: asyncio.StreamWriter, refused: _Refused) -> None:
    body = f"talon egress guard: {refused.detail}\n".encode()
    head = (
        f"HTTP/1.1 {refused.status} {refused.reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(ConnectionError, OSError):
        writer.write(head.encode() + body)
        await writer.drain()
    writer.close()
