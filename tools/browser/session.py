"""One thread's browser session: its Chromium context, its current tab, and what happened there.

A session holds the context (cookies, storage), the tab later calls act on, the guard of
its requests (:mod:`tools.browser.guard`), and what the page did that the model should hear
of at the next observation: requests refused, dialogs dismissed, downloads saved, popups.
Calls on one session run one at a time (``lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.workspaces import WORKSPACE
from tools.base import ToolError
from tools.browser.guard import RequestGuard

__all__ = ["DOWNLOADS", "SCREENSHOTS", "BrowserSession", "SessionKey"]

log = logging.getLogger(__name__)

SessionKey = tuple[str, int]  # (persona, thread_id)
DOWNLOADS = "downloads"
SCREENSHOTS = "screenshots"
DOWNLOAD_TIMEOUT = 120.0
MAX_NOTES = 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(slots=True)
class BrowserSession:
    """A thread's context and current page.

    Attributes:
        key (:data:`SessionKey`): Whose session it is.
        context: The Playwright ``BrowserContext``.
        guard (:class:`tools.browser.guard.RequestGuard`): Its egress guard.
        workspace (:class:`pathlib.Path`): The thread's ``/workspace`` on the host.
        marker (:obj:`str`): The attribute that carries ``el_`` ids on this session's pages
            (random, so a page cannot guess it before an observation).
    """

    key: SessionKey
    context: Any
    guard: RequestGuard
    workspace: Path
    max_download_bytes: int
    page: Any = None
    marker: str = field(default_factory=lambda: f"data-talon-{secrets.token_hex(4)}")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    notes: list[str] = field(default_factory=list)
    downloads: list[dict[str, Any]] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def require_page(self) -> Any:
        """The current tab, or a :class:`ToolError` telling the model to open one."""
        if self.page is None or self.page.is_closed():
            raise ToolError("no page is open in this thread's browser; call browser_open with a url first")
        return self.page

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def take_events(self) -> dict[str, Any]:
        """What happened since the last observation (only the keys that have something)."""
        events: dict[str, Any] = {}
        blocked = self.guard.take_blocked()
        if blocked:
            events["blocked"] = blocked
        if self.notes:
            events["notes"], self.notes = self.notes, []
        if self.downloads:
            events["downloads"], self.downloads = self.downloads, []
        return events

    # ------------------------------------------------------------ page events

    def watch(self, page: Any) -> None:
        """Dismiss the page's dialogs (they would block it) and save its downloads."""
        page.on("dialog", lambda dialog: self._spawn(self._dismiss(dialog)))
        page.on("download", lambda download: self._spawn(self._save(download)))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dismiss(self, dialog: Any) -> None:
        self.note(f"a {dialog.type} dialog was dismissed: {dialog.message[:200]!r}")
        with contextlib.suppress(Exception):
            await dialog.dismiss()

    async def _save(self, download: Any) -> None:
        name = _safe_name(download.suggested_filename)
        folder = self.workspace / DOWNLOADS
        try:
            async with asyncio.timeout(DOWNLOAD_TIMEOUT):
                temp = await download.path()
        except TimeoutError:
            with contextlib.suppress(Exception):
                await download.cancel()
            self.downloads.append({"name": name, "error": f"not finished within {DOWNLOAD_TIMEOUT:g} s"})
            return
        except Exception as exc:
            self.downloads.append({"name": name, "error": f"failed: {str(exc).splitlines()[0][:200]}"})
            return
        size = (await asyncio.to_thread(Path(temp).stat)).st_size
        if size > self.max_download_bytes:
            self.downloads.append(
                {"name": name, "error": f"{size:,} bytes, over browser.max_download_bytes; not saved"}
            )
            return
        target = await asyncio.to_thread(_free_path, folder, name)
        await download.save_as(target)
        self.downloads.append({"path": f"{WORKSPACE}/{DOWNLOADS}/{target.name}", "size": size})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.context.close()
        await self.guard.close()


def _safe_name(suggested: str) -> str:
    name = _UNSAFE.sub("_", suggested or "").strip("._")[:100]
    return name or "download"


def _free_path(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    candidate = folder / name
    n = 1
    while candidate.exists():
        n += 1
        candidate = folder / (f"{stem}-{n}.{suffix}" if suffix else f"{stem}-{n}")
    return candidate
