"""The preview pacer: streamed text and tool status shown at a bounded rate.

The model loop hands text deltas and status changes to :meth:`PreviewPacer.text` and
:meth:`PreviewPacer.status`, which only record them: one background task shows the latest
state at most once per ``interval``, so deltas that arrive meanwhile are coalesced into the
next edit, edits never queue behind each other, and a slow edit never holds up the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from connectors.base import ErrorClass, SendResult

log = logging.getLogger("talon.streaming")

Show = Callable[[str, str | None], Awaitable[SendResult]]
"""Shows ``(body, status)``: the text so far (already cut to the limit) and the tool status."""

_ELLIPSIS = "…"
_CLOSE_WAIT = 5.0  # seconds close() waits for an edit in flight


def preview_body(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (its beginning, ending in an ellipsis)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + _ELLIPSIS


class PreviewPacer:
    """Coalesces a turn's streamed text and status into previews shown through ``show``.

    Args:
        show: shows one state of the preview; its result says whether it was shown.
        interval: the fewest seconds between two shows.
        limit: the longest body in characters (the rest is cut, ending in "…").
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        show: Show,
        *,
        interval: float,
        limit: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._show = show
        self.interval = interval
        self.limit = limit
        self._clock = clock
        self._text: list[str] = []
        self._status: str | None = None
        self._new_segment = False  # the next delta starts a new model call's text
        self._shown: tuple[str, str | None] | None = None
        self._next_at = 0.0
        self._dirty = asyncio.Event()
        self._closed = False
        self.failed = False  # the platform refused the preview: nothing more is shown
        self.shows = 0
        self._in_show = False
        self._task: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- from the model loop

    def text(self, delta: str) -> None:
        """More of the model's text. Never waits."""
        if not delta:
            return
        if self._new_segment:  # text before a tool call is superseded by the next answer
            self._text.clear()
            self._new_segment = False
        self._status = None  # the model writes again: the tool's status is over
        self._text.append(delta)
        self._kick()

    def status(self, label: str | None) -> None:
        """What the turn is doing now ("Running a command…"), shown until the model writes
        again or another status replaces it; ``None`` clears it. Never waits."""
        if label is not None:
            self._new_segment = bool(self._text) or self._new_segment
        if label != self._status:
            self._status = label
            self._kick()

    @property
    def full_text(self) -> str:
        return "".join(self._text)

    # ---------------------------------------------------------------- the loop

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="preview-pacer")

    def _kick(self) -> None:
        if self._closed or self.failed:
            return
        self._dirty.set()
        self.start()

    def state(self) -> tuple[str, str | None]:
        return preview_body(self.full_text, self.limit), self._status

    async def _run(self) -> None:
        while not self._closed and not self.failed:
            await self._dirty.wait()
            delay = self._next_at - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)  # whatever arrives meanwhile goes into this one show
            if self._closed:
                return
            self._dirty.clear()
            state = self.state()
            if state == self._shown or not (state[0] or state[1]):
                continue
            self._in_show = True
            try:
                result = await self._show(*state)
            finally:
                self._in_show = False
            now = self._clock()
            self._next_at = now + max(self.interval, result.retry_after or 0.0)
            if result.ok:
                self._shown = state
                self.shows += 1
            elif result.error_class is not ErrorClass.TRANSIENT:
                log.info(
                    "preview not shown (%s): %s; the reply will arrive whole",
                    result.error_class,
                    result.error,
                )
                self.failed = True

    async def close(self, *, wait: bool = True) -> None:
        """Stop showing; an edit in flight may finish (bounded), then (``wait``) wait out the
        interval since the last show (or the platform's retry_after), so the final reply's
        edit stays within the rate too."""
        self._closed = True
        self._dirty.set()
        task, self._task = self._task, None
        if task is not None:
            done: set[asyncio.Task[None]] = set()
            if self._in_show:
                done, _ = await asyncio.wait({task}, timeout=_CLOSE_WAIT)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        pause = self._next_at - self._clock()  # the interval, or the platform's retry_after
        if wait and pause > 0 and not self.failed:
            await asyncio.sleep(pause)
