"""The daemon's one Chromium: started with the daemon, one context per thread.

:func:`manager_for` gives the :class:`BrowserManager` of a daemon (one per data directory);
the daemon starts it in the background (:func:`warm_browser`) and closes it at stop
(:func:`close_browser`). The manager

- starts Playwright's driver and Chromium (at the daemon's start with ``browser.keep_warm``,
  else at the first call), with an environment of their own (no bot tokens or API keys:
  :func:`tools.browser.chromium.chromium_environment`);
- keeps one spare tab (a fresh context on ``about:blank``) for the next thread's first
  ``browser_open``, made again in the background when a thread takes it;
- gives each (persona, thread) a session (:class:`tools.browser.session.BrowserSession`)
  whose context sends every request through the guard (:mod:`tools.browser.guard`);
- closes a session unused for ``browser.idle_timeout_seconds``;
- keeps at most ``browser.max_contexts`` sessions and ``browser.max_pages`` tabs: a new session
  past the cap closes the least recently used idle one (its thread is told so at its next
  call); when every session is busy the call gets an error saying to try again; a popup past
  the tab cap is closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway.workspaces import thread_workspace
from tools.base import ToolError
from tools.browser.chromium import (
    CONFINED_ARGUMENTS,
    browser_problem,
    chromium_environment,
    find_chromium,
    sandbox_enabled,
)
from tools.browser.guard import RequestGuard
from tools.browser.session import BrowserSession, SessionKey
from tools.egress import Resolve, persona_policy
from tools.ssrf import EgressPolicy

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gateway.config import Settings
    from gateway.personas import Persona

__all__ = ["BrowserManager", "close_browser", "manager_for", "warm_browser"]

log = logging.getLogger(__name__)

LAUNCH_TIMEOUT = 30.0
_NOWHERE = "http://127.0.0.1:9"  # the discard port, closed on loopback
DEFAULT_ACTION_TIMEOUT_MS = 10_000
_MANAGERS: dict[Path, BrowserManager] = {}


def manager_for(settings: Settings) -> BrowserManager:
    """The browser manager of the daemon whose data directory ``settings`` name."""
    key = settings.data_path
    manager = _MANAGERS.get(key)
    if manager is None:
        manager = _MANAGERS[key] = BrowserManager(settings)
    return manager


async def warm_browser(settings: Settings, personas: Mapping[str, Persona]) -> None:
    """Start the daemon's Chromium and its spare tab ahead of the first browser call.

    Does nothing without ``browser.keep_warm``, without a persona holding ``browser.use``, or
    where no Chromium is available. The spare is made under the first such persona's policy.
    """
    users = [p for _, p in sorted(personas.items()) if "browser.use" in p.capabilities]
    if not settings.browser.keep_warm or not users or browser_problem(settings.browser) is not None:
        return
    await manager_for(settings).warm_up(persona_policy(settings, users[0]))


async def close_browser(data_path: Path) -> None:
    """Close the browser of the daemon at ``data_path`` (the daemon's stop hook)."""
    manager = _MANAGERS.pop(data_path, None)
    if manager is not None:
        await manager.close()


class BrowserManager:
    """Chromium, its sessions and their caps, for one daemon.

    Attributes:
        resolve: Replaces the system resolver in every session's guard (tests use a stub).
    """

    def __init__(self, settings: Settings, *, resolve: Resolve | None = None) -> None:
        self.settings = settings
        self.resolve = resolve
        self._sessions: dict[SessionKey, BrowserSession] = {}
        self._ended: dict[SessionKey, str] = {}  # why a thread's session went away
        self._launch_lock = asyncio.Lock()
        self._playwright: Any = None
        self._browser: Any = None
        self._reaper: asyncio.Task[None] | None = None
        self._spare: _Spare | None = None
        self._spare_task: asyncio.Task[None] | None = None
        self.launches = 0

    @property
    def config(self) -> Any:
        return self.settings.browser

    # ------------------------------------------------------------ sessions

    async def existing(self, key: SessionKey) -> BrowserSession:
        """The open session of ``key``, or an error the model can act on."""
        session = self._sessions.get(key)
        if session is None:
            why = self._ended.get(key)
            detail = f" (its browser session {why})" if why else ""
            raise ToolError(
                f"no page is open in this thread's browser{detail}; call browser_open with a url first"
            )
        timeout = self.config.idle_timeout_seconds
        if not session.lock.locked() and time.monotonic() - session.last_used > timeout:
            # The reaper has not come round yet: the session is closed all the same.
            await self.close_session(key, f"was closed after {timeout:g} s unused")
            return await self.existing(key)
        session.touch()
        return session

    async def session(self, key: SessionKey, policy: EgressPolicy) -> BrowserSession:
        """The session of ``key``, made when there is none (the browser started when needed).

        A new session takes the spare tab when it was made under the same policy, and a new
        spare is made in the background; otherwise it gets a context of its own.
        """
        session = self._sessions.get(key)
        if session is not None:
            session.touch()
            return session
        spare, self._spare = self._spare, None
        if spare is not None and spare.made_for != self._made_for(policy):
            await spare.close()
            spare = None
        try:
            await self._make_room(pages=1)
        except BaseException:
            if spare is not None:
                await spare.close()
            raise
        if spare is not None:
            guard, context, page = spare.guard, spare.context, spare.page
        else:
            browser = await self._ensure_browser()
            guard, context = await self._new_context(browser, policy)
            page = None
        persona, thread_id = key
        session = BrowserSession(
            key,
            context,
            guard,
            thread_workspace(self.settings, persona, thread_id),
            self.config.max_download_bytes,
        )
        if page is not None and not page.is_closed():
            session.watch(page)
            session.page = page
        context.on("page", lambda page: self._on_page(session, page))
        self._sessions[key] = session
        self._ended.pop(key, None)
        self._start_reaper()
        self.refill_spare(policy)
        return session

    async def _new_context(self, browser: Any, policy: EgressPolicy) -> tuple[RequestGuard, Any]:
        """A context whose every request goes through a new guard under ``policy``."""
        guard = RequestGuard(policy, self.resolve)
        proxy = await guard.start_proxy()
        try:
            context = await browser.new_context(
                proxy={"server": proxy},
                viewport={"width": self.config.viewport_width, "height": self.config.viewport_height},
                accept_downloads=True,
                service_workers="block",  # a service worker's fetches would not be routed
                locale="en-US",
                timezone_id="UTC",
            )

            # Closures, not bound methods: Playwright keeps bookkeeping attributes on the handler.
            async def on_route(route: Any) -> None:
                await guard.on_route(route)

            async def on_web_socket(ws: Any) -> None:
                await guard.on_web_socket(ws)

            await context.route("**/*", on_route)
            await context.route_web_socket("**/*", on_web_socket)
            context.set_default_timeout(DEFAULT_ACTION_TIMEOUT_MS)
        except BaseException:
            await guard.close()
            raise
        return guard, context

    # ------------------------------------------------------------ the spare tab

    def refill_spare(self, policy: EgressPolicy) -> None:
        """Make a spare tab under ``policy`` in the background, when there is room for one.

        Opening a tab starts a renderer process, most of a first ``browser_open``'s time; a
        spare (a fresh context on ``about:blank``, nothing loaded, nothing shared) saves it.
        """
        if not self.config.keep_warm or self._spare is not None:
            return
        if self._spare_task is not None and not self._spare_task.done():
            return
        self._spare_task = asyncio.get_running_loop().create_task(self._make_spare(policy))

    async def _make_spare(self, policy: EgressPolicy) -> None:
        try:
            browser = await self._ensure_browser()
            if not self._room_for_spare():
                return
            guard, context = await self._new_context(browser, policy)
            try:
                page = await context.new_page()
            except BaseException:
                with contextlib.suppress(Exception):
                    await context.close()
                await guard.close()
                raise
            spare = _Spare(self._made_for(policy), guard, context, page)
            if self._spare is not None or not self._room_for_spare() or not browser.is_connected():
                await spare.close()
                return
            self._spare = spare
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next browser_open makes its own context and says why
            log.info("no spare browser tab: %s", str(exc).splitlines()[0][:200] if str(exc) else exc)

    def _made_for(self, policy: EgressPolicy) -> tuple[Any, ...]:
        """What a context is made under: a spare made otherwise is not used."""
        return (policy, self.config.viewport_width, self.config.viewport_height)

    def _room_for_spare(self) -> bool:
        return len(self._sessions) < self.config.max_contexts and self.open_pages() < self.config.max_pages

    async def warm_up(self, policy: EgressPolicy) -> None:
        """Start Chromium and make a spare tab under ``policy`` (the daemon's start, off the path)."""
        self.refill_spare(policy)
        if self._spare_task is not None:
            await asyncio.gather(self._spare_task, return_exceptions=True)
        else:
            with contextlib.suppress(ToolError):
                await self._ensure_browser()

    async def new_page(self, session: BrowserSession) -> Any:
        """Give ``session`` its tab (the one later calls act on)."""
        if session.page is not None and not session.page.is_closed():
            return session.page
        await self._make_room(pages=1, keep=session.key)
        page = await session.context.new_page()
        session.page = page
        return page

    def _on_page(self, session: BrowserSession, page: Any) -> None:
        session.watch(page)
        if session.page is None or session.page is page:
            return
        if self.open_pages() > self.config.max_pages:
            session.note(f"a popup to {page.url[:200]} was closed: browser.max_pages tabs are open")
            asyncio.get_running_loop().create_task(page.close())
            return
        session.note(f"the page opened a new tab ({page.url[:200]}); later calls act on it")
        session.page = page

    def open_pages(self) -> int:
        """Tabs open in the sessions and the spare."""
        spare = len(self._spare.context.pages) if self._spare is not None else 0
        return spare + sum(len(s.context.pages) for s in self._sessions.values())

    async def close_session(self, key: SessionKey, why: str | None = None) -> bool:
        """Close ``key``'s session; whether there was one."""
        session = self._sessions.pop(key, None)
        if session is None:
            return False
        if why:
            self._ended[key] = why
            while len(self._ended) > 1000:
                self._ended.pop(next(iter(self._ended)))
        await session.close()
        return True

    async def _make_room(self, *, pages: int, keep: SessionKey | None = None) -> None:
        """Close least recently used idle sessions until one more session and ``pages`` fit."""
        while True:
            over_contexts = keep is None and len(self._sessions) >= self.config.max_contexts
            over_pages = self.open_pages() + pages > self.config.max_pages
            if not over_contexts and not over_pages:
                return
            if self._spare is not None:
                spare, self._spare = self._spare, None
                await spare.close()
                continue
            idle = [s for s in self._sessions.values() if s.key != keep and not s.lock.locked()]
            if not idle:
                what = "sessions" if over_contexts else "tabs"
                raise ToolError(
                    f"every browser {what[:-1]} the daemon allows is in use "
                    f"(browser.max_contexts {self.config.max_contexts}, browser.max_pages "
                    f"{self.config.max_pages}); try again in a moment"
                )
            oldest = min(idle, key=lambda s: s.last_used)
            await self.close_session(oldest.key, "was closed to make room for another thread's")

    # ------------------------------------------------------------ idle sessions

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done() or self._reaper.cancelling():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        """Close idle sessions; ends when none is left."""
        while self._sessions:
            timeout = self.config.idle_timeout_seconds
            await asyncio.sleep(min(max(timeout / 4, 0.05), 30.0))
            now = time.monotonic()
            for key, session in list(self._sessions.items()):
                if not session.lock.locked() and now - session.last_used > timeout:
                    await self.close_session(key, f"was closed after {timeout:g} s unused")

    # ------------------------------------------------------------ the browser

    async def _ensure_browser(self) -> Any:
        async with self._launch_lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            problem = browser_problem(self.config)
            executable = find_chromium(self.config.executable)
            if problem is not None or executable is None:
                raise ToolError(f"the browser is not available: {problem}")
            try:
                async with asyncio.timeout(LAUNCH_TIMEOUT):
                    self._browser = await self._launch(executable)
            except TimeoutError:
                raise ToolError(f"Chromium did not start within {LAUNCH_TIMEOUT:g} s; try again") from None
            self.launches += 1
            self._browser.on("disconnected", lambda _b: self._lost())
            return self._browser

    async def _launch(self, executable: str) -> Any:
        from playwright.async_api import async_playwright

        if self._playwright is None:
            _confine_driver_environment()
            self._playwright = await async_playwright().start()
        home = self.settings.data_path / "browser"
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        return await self._playwright.chromium.launch(
            executable_path=executable,
            args=list(CONFINED_ARGUMENTS),
            chromium_sandbox=sandbox_enabled(self.config),
            env=chromium_environment(home),
            # Traffic of the browser itself (outside any session's context, which has its own
            # guarded proxy) goes to a closed loopback port: nowhere.
            proxy={"server": _NOWHERE},
            headless=True,
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )

    def _lost(self) -> None:
        """Chromium went away (crashed, killed): its sessions are gone with it."""
        self._browser = None
        spare, self._spare = self._spare, None
        if spare is not None:
            asyncio.get_running_loop().create_task(spare.guard.close())
        for key in list(self._sessions):
            self._ended[key] = "ended when Chromium stopped"
            session = self._sessions.pop(key)
            asyncio.get_running_loop().create_task(session.guard.close())

    async def close(self) -> None:
        """Close every session, Chromium and the driver."""
        for task in (self._reaper, self._spare_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        spare, self._spare = self._spare, None
        if spare is not None:
            await spare.close()
        for key in list(self._sessions):
            await self.close_session(key)
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()


@dataclass(slots=True)
class _Spare:
    """A context and its blank tab made ahead of need, for the next thread it fits."""

    made_for: tuple[Any, ...]  # the policy and settings it was made under
    guard: RequestGuard
    context: Any
    page: Any

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.context.close()
        await self.guard.close()


def _confine_driver_environment() -> None:
    """Start Playwright's driver without the daemon's secrets in its environment.

    The driver (a Node process) is started with a copy of ``os.environ``, which holds bot
    tokens and API keys; only what it needs is kept.
    """
    from playwright._impl import transport

    original = getattr(transport.get_driver_env, "__wrapped__", transport.get_driver_env)

    def driver_env() -> dict[str, str]:
        env = original()
        keep = {"PATH", "HOME", "LANG", "TMPDIR"}
        return {k: v for k, v in env.items() if k in keep or k.startswith(("PW_", "PLAYWRIGHT_"))}

    driver_env.__wrapped__ = original  # type: ignore[attr-defined]
    transport.get_driver_env = driver_env
