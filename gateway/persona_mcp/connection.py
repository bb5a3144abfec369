"""One persona MCP server: started once, shared by the persona's turns, restarted after failures."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from gateway.errors import TransientError
from gateway.persona_mcp.results import outcome_from_result
from gateway.persona_mcp.sandbox import DEFAULT_BWRAP, SandboxError, build_launch
from gateway.persona_mcp.settings import HttpServerSettings, McpServerSettings
from gateway.persona_mcp.transport import StderrLog, http_transport, stdio_transport, watched
from gateway.runtime.agent import ToolOutcome

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["McpServerConnection", "ServerUnavailableError"]

log = logging.getLogger("talon.persona_mcp")

# After a call times out, the server must answer a listing within this long or it is restarted.
_PROBE_SECONDS = 5.0
# Past the SDK's own per-call timeout, the call is abandoned outright (a write that never ends).
_CALL_GRACE = 5.0


class ServerUnavailableError(TransientError):
    """The server cannot take calls now; the message is meant for the model and the log."""


@dataclass(slots=True)
class _Live:
    """A running connection: the task that holds the client open, and its signals."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    task: asyncio.Task[None] | None = None


class McpServerConnection:
    """A persona's MCP server (stdio or streamable HTTP).

    The server is started on the first :meth:`start_soon`, :meth:`ensure` or :meth:`call` and
    kept running. When it exits, fails, or stops answering after a timed-out call, it is
    closed and the next use starts it again, no sooner than an exponential backoff allows.

    Args:
        persona (:obj:`str`): The persona's name.
        name (:obj:`str`): The server's name in ``mcp_servers``.
        settings (:obj:`gateway.persona_mcp.settings.McpServerSettings`): Its entry.
        workspace (:class:`pathlib.Path`): The persona's shared workspace, ``/shared`` of the file
            tools (a stdio server's cwd and HOME); never a thread's.
        workspace_writable (:obj:`bool`, optional): Bind it read-write (``workspace.read_only``
            of persona.yaml makes it read-only).
        log_path (:class:`pathlib.Path`): Where a stdio server's stderr is appended.
        bwrap (:obj:`str`, optional): The bubblewrap binary.
        start_timeout (:obj:`float`, optional): Seconds a start (launch, handshake, tool listing)
            may take.
        backoff (:obj:`float`, optional): Seconds before the first restart after a failure;
            doubled after each further failure.
        max_backoff (:obj:`float`, optional): The longest wait between restarts.
        preflight (Callable[[], :obj:`str` | :obj:`None`], optional): Run before each sandboxed
            launch (off the event loop); a returned message refuses the launch.
    """

    def __init__(
        self,
        persona: str,
        name: str,
        settings: McpServerSettings,
        *,
        workspace: Path,
        workspace_writable: bool = True,
        log_path: Path,
        bwrap: str = DEFAULT_BWRAP,
        start_timeout: float = 30.0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        preflight: Callable[[], str | None] | None = None,
    ):
        self.persona = persona
        self.name = name
        self.settings = settings
        self.workspace = workspace
        self.workspace_writable = workspace_writable
        self.bwrap = bwrap
        self.start_timeout = start_timeout
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.preflight = preflight
        self.tools: tuple[types.Tool, ...] | None = None
        self.last_error: str | None = None
        self._log = StderrLog(log_path)
        self._live: _Live | None = None
        self._starting: asyncio.Task[Client] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._failures = 0
        self._retry_at = 0.0
        self._stopped = False

    @property
    def label(self) -> str:
        return f"{self.persona}/{self.name}"

    @property
    def running(self) -> bool:
        live = self._live
        return live is not None and live.client is not None and not live.closed.is_set()

    # ------------------------------------------------------------ starting

    def start_soon(self) -> asyncio.Task[Client] | None:
        """Start in the background unless running, starting, backing off or stopped.

        Returns:
            The start in progress, if there is one.
        """
        if self._stopped or self.running:
            return None
        if self._starting is None and time.monotonic() < self._retry_at:
            return None
        return self._start_task()

    async def ensure(self, patience: float) -> Client:
        """A connected client, starting the server when needed.

        A restart backoff shorter than ``patience`` seconds is waited out, a longer one raises;
        a start is waited for (it is bounded by ``start_timeout``).

        Raises:
            :class:`ServerUnavailableError`
        """
        if self._stopped:
            raise ServerUnavailableError(f"MCP server {self.name} is shut down")
        live = self._live
        if live is not None and live.client is not None and not live.closed.is_set():
            return live.client
        if live is not None:
            self._lost(live, "the server exited")
        if self._starting is None:
            wait = self._retry_at - time.monotonic()
            if wait > patience:
                raise ServerUnavailableError(
                    f"MCP server {self.name} is unavailable ({self.last_error}); the next start attempt "
                    f"is in {wait:.0f} s. Continue without its tools or try again later."
                )
            if wait > 0:
                await asyncio.sleep(wait)
                if self._stopped:
                    raise ServerUnavailableError(f"MCP server {self.name} is shut down")
        # Shielded: a caller that gives up must not abort a start other callers wait for.
        return await asyncio.shield(self._start_task())

    def _start_task(self) -> asyncio.Task[Client]:
        if self._starting is None:
            self._starting = asyncio.create_task(self._start(), name=f"mcp-start {self.label}")
            self._starting.add_done_callback(self._started)
        return self._starting

    def _started(self, task: asyncio.Task[Client]) -> None:
        self._starting = None
        if not task.cancelled():
            task.exception()  # retrieved: callers that gave up waiting must not cause a warning

    async def _start(self) -> Client:
        self._log.forget()
        try:
            return await asyncio.wait_for(self._connect(), self.start_timeout)
        except ServerUnavailableError as exc:
            reason = str(exc)
        except TimeoutError:
            reason = f"it did not finish starting within {self.start_timeout:g} s"
        except (MCPError, OSError, ValidationError, ExceptionGroup) as exc:
            reason = _describe(exc)
        except Exception as exc:
            log.exception("MCP server %s failed to start", self.label)
            reason = f"{type(exc).__name__}: {exc}"
        tail = self._log.tail() if not isinstance(self.settings, HttpServerSettings) else ""
        if tail and tail not in reason:
            reason = f"{reason} (stderr: {tail})"
        self._failed(reason)
        raise ServerUnavailableError(f"MCP server {self.name} failed to start: {reason}")

    async def _connect(self) -> Client:
        with ExitStack() as files:
            transport = await self._transport(files)
            ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            # Nobody may be waiting any more when a late failure lands.
            ready.add_done_callback(lambda f: f.cancelled() or f.exception())
            live = _Live()
            live.task = asyncio.create_task(
                self._hold(transport, live, ready, files.pop_all()), name=f"mcp {self.label}"
            )
        try:
            client = await asyncio.shield(ready)
            listing = await client.list_tools()
        except BaseException:
            self._close(live)
            raise
        live.client = client
        self._live = live
        self.tools = tuple(listing.tools)
        self.last_error = None
        sandbox = getattr(self.settings, "sandbox", "remote")
        log.info("MCP server %s ready: %d tools (sandbox: %s)", self.label, len(self.tools), sandbox)
        return client

    async def _transport(self, files: ExitStack) -> AbstractAsyncContextManager[TransportStreams]:
        if isinstance(self.settings, HttpServerSettings):
            return http_transport(self.settings)
        if self.settings.sandbox == "bwrap" and self.preflight is not None:
            problem = await asyncio.to_thread(self.preflight)
            if problem:
                raise ServerUnavailableError(problem.replace("the servers that use it", self.name))
        try:
            launch = build_launch(
                self.settings,
                self.workspace,
                server=self.name,
                bwrap=self.bwrap,
                writable=self.workspace_writable,
            )
        except SandboxError as exc:
            raise ServerUnavailableError(str(exc)) from None
        errlog = files.enter_context(self._log.open())
        return stdio_transport(launch, errlog, label=self.label)

    async def _hold(
        self,
        transport: AbstractAsyncContextManager[TransportStreams],
        live: _Live,
        ready: asyncio.Future[Client],
        files: ExitStack,
    ) -> None:
        """Keep the client open until told to stop or the server goes away.

        One task enters and leaves the client: its cancel scopes require that.
        """
        with files:
            try:
                async with Client(watched(transport, live.closed), cache=None) as client:
                    ready.set_result(client)
                    await _either(live.stop, live.closed)
            except asyncio.CancelledError:
                if not ready.done():
                    ready.set_exception(ServerUnavailableError("the start was abandoned"))
                raise
            except Exception as exc:
                if not ready.done():
                    ready.set_exception(exc)
                else:
                    log.warning("MCP server %s connection ended: %s", self.label, _describe(exc))

    # ------------------------------------------------------------ calls

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call ``tool``; every failure becomes an error outcome the model can act on."""
        timeout = self.settings.timeout
        try:
            client = await self.ensure(patience=timeout)
        except ServerUnavailableError as exc:
            return ToolOutcome(str(exc), is_error=True)
        live = self._live
        try:
            async with asyncio.timeout(timeout + _CALL_GRACE):
                result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                await self._after_timeout(client, live)
                return self._timed_out(tool, timeout)
            if exc.code == CONNECTION_CLOSED:
                self._lost(live, f"it exited during a call to {tool}")
                return ToolOutcome(
                    f"MCP server {self.name} stopped while running {tool}{self._stderr_note()}; "
                    "it is restarted on the next call.",
                    is_error=True,
                )
            return ToolOutcome(f"{tool} failed: {exc.error.message}", is_error=True)
        except TimeoutError:
            self._lost(live, f"a call to {tool} did not end")
            return self._timed_out(tool, timeout)
        except ValidationError as exc:
            return ToolOutcome(
                f"{tool} returned a result that is not valid MCP: {exc.error_count()} errors", True
            )
        except Exception as exc:
            self._lost(live, _describe(exc))
            return ToolOutcome(
                f"MCP server {self.name} failed during {tool}: {_describe(exc)}; it is restarted on the next call.",
                is_error=True,
            )
        self._failures = 0
        return outcome_from_result(result)

    def _timed_out(self, tool: str, timeout: float) -> ToolOutcome:
        return ToolOutcome(
            f"{tool} did not finish within {timeout:g} s and was cancelled. Try a smaller request, "
            "or continue without it.",
            is_error=True,
        )

    async def _after_timeout(self, client: Client, live: _Live | None) -> None:
        """A timed-out call may have wedged the server: restart it unless it still answers."""
        try:
            async with asyncio.timeout(min(_PROBE_SECONDS, self.settings.timeout)):
                await client.list_tools()
        except Exception:
            self._lost(live, "it stopped answering after a call timed out")

    def _stderr_note(self) -> str:
        tail = self._log.tail() if not isinstance(self.settings, HttpServerSettings) else ""
        return f" (stderr: {tail})" if tail else ""

    # ------------------------------------------------------------ failures and stopping

    def _failed(self, reason: str) -> None:
        self._failures += 1
        delay = min(self.backoff * 2 ** (self._failures - 1), self.max_backoff)
        self._retry_at = time.monotonic() + delay
        self.last_error = reason
        log.error("MCP server %s: %s; next start in %.1f s at the earliest", self.label, reason, delay)

    def _lost(self, live: _Live | None, reason: str) -> None:
        """Close a connection that failed; the next use starts a new one after the backoff."""
        if live is None:
            return
        if self._live is live:
            self._live = None
            if not self._stopped:
                self._failed(reason)
        self._close(live)

    def _close(self, live: _Live) -> None:
        live.stop.set()
        if live.task is None:
            return
        if live.client is None:  # still in the handshake, which does not watch ``stop``
            live.task.cancel()
        if not live.task.done():
            self._closing.add(live.task)
            live.task.add_done_callback(self._closing.discard)

    async def stop(self) -> None:
        """Stop the server (its process is ended) and refuse further use."""
        self._stopped = True
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        if self._live is not None:
            self._close(self._live)
            self._live = None
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def _either(a: asyncio.Event, b: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename or 'the command'} was not found"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
