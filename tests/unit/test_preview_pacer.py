"""The preview pacer: deltas are coalesced, shows are at least one interval apart, a slow
show never holds up the model, the platform's refusals and retry_after are honoured, and
closing waits out the interval so the final edit keeps the rate too."""

from __future__ import annotations

import asyncio
import itertools
import time

from connectors.base import ErrorClass, SendResult
from gateway.live_reply import WRITING, compose
from gateway.streaming import PreviewPacer, preview_body

INTERVAL = 0.1


class Screen:
    """What a chat would show: every state passed to ``show``, when, and how long each took."""

    def __init__(self, *, delay: float = 0.0, results: list[SendResult] | None = None) -> None:
        self.delay = delay
        self.results = list(results or [])
        self.shown: list[tuple[str, str | None]] = []
        self.times: list[float] = []

    async def show(self, body: str, status: str | None) -> SendResult:
        self.times.append(time.monotonic())
        await asyncio.sleep(self.delay)
        result = self.results.pop(0) if self.results else SendResult.sent("1")
        if result.ok:
            self.shown.append((body, status))
        return result


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def stream(pacer: PreviewPacer, pieces: list[str], every: float) -> None:
    for piece in pieces:
        pacer.text(piece)
        await asyncio.sleep(every)


async def test_many_deltas_are_coalesced_into_few_shows_at_most_one_per_interval() -> None:
    screen = Screen()
    pacer = PreviewPacer(screen.show, interval=INTERVAL, limit=1000)
    pieces = [f"w{i} " for i in range(60)]
    await stream(pacer, pieces, 0.005)  # 60 deltas in ~0.3 s
    await pacer.close()
    assert 2 <= len(screen.shown) <= 6
    assert min(gaps(screen.times)) >= INTERVAL * 0.95
    assert screen.shown[-1][0] in "".join(pieces)  # shown text is always a prefix of the stream


async def test_a_slow_show_never_blocks_the_text_and_what_arrived_meanwhile_is_one_show() -> None:
    screen = Screen(delay=0.3)
    pacer = PreviewPacer(screen.show, interval=INTERVAL, limit=10_000)
    pacer.text("first")
    await asyncio.sleep(0.02)  # the first show is in flight now
    started = time.monotonic()
    for i in range(500):
        pacer.text(f" {i}")
    assert time.monotonic() - started < 0.05  # text() only records
    await asyncio.sleep(0.75)
    await pacer.close()
    assert len(screen.times) == 2  # the in-flight show, then one show with everything else
    assert screen.shown[-1][0].endswith(" 499")


async def test_closing_waits_out_the_interval_after_the_last_show() -> None:
    screen = Screen()
    pacer = PreviewPacer(screen.show, interval=0.3, limit=1000)
    pacer.text("hello")
    await asyncio.sleep(0.05)
    await pacer.close()
    assert time.monotonic() - screen.times[-1] >= 0.3 * 0.95


async def test_a_refused_preview_stops_the_previews() -> None:
    screen = Screen(results=[SendResult.failed(ErrorClass.PERMANENT, "message to edit not found")])
    pacer = PreviewPacer(screen.show, interval=0.02, limit=1000)
    await stream(pacer, ["a", "b", "c", "d"], 0.05)
    await pacer.close()
    assert pacer.failed and len(screen.times) == 1 and screen.shown == []


async def test_flood_control_delays_the_next_show_by_retry_after() -> None:
    screen = Screen(results=[SendResult.failed(ErrorClass.TRANSIENT, "429", retry_after=0.4)])
    pacer = PreviewPacer(screen.show, interval=0.02, limit=1000)
    await stream(pacer, ["a", "b", "c"], 0.05)
    await asyncio.sleep(0.5)
    await pacer.close()
    assert not pacer.failed
    assert gaps(screen.times)[0] >= 0.4 * 0.95
    assert screen.shown[-1][0] == "abc"


async def test_a_tool_status_is_shown_until_the_next_answer_whose_text_replaces_the_earlier() -> None:
    screen = Screen()
    pacer = PreviewPacer(screen.show, interval=0.05, limit=1000)
    pacer.text("Let me look.")
    await asyncio.sleep(0.08)
    pacer.status("Reading a file…")
    await asyncio.sleep(0.08)
    pacer.text("Found it.")
    await asyncio.sleep(0.08)
    await pacer.close()
    assert screen.shown == [("Let me look.", None), ("Let me look.", "Reading a file…"), ("Found it.", None)]


def test_the_preview_is_cut_to_its_limit_and_always_ends_with_a_progress_line() -> None:
    body = preview_body("x" * 50, 10)
    assert body == "x" * 9 + "…"
    assert compose(body, None).endswith(WRITING)
    assert compose("", "Running a command…") == "⏳ Running a command…"
    assert preview_body("  short  ", 10) == "short"
