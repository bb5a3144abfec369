"""Intake limits: when a message is due under the chat's rate, who is told they are slowed,
and how long text is cut with the full text kept beside the chat's files."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import InboundEvent, IntakeStatus, Sender, ThreadKey
from gateway.config import Binding, ConfigError, RateLimitSettings, load_settings
from gateway.intake_limits import ChannelLimits, IntakeLimits
from gateway.intake_rate import RateLimiter
from gateway.intake_text import cut_long_text, full_text_path
from gateway.pipeline import Bindings, Pipeline
from gateway.store.db import Database, open_database
from gateway.workspaces import thread_folder
from tests.store_helpers import fetch_row, fetch_rows

RATE = RateLimitSettings(per_user=10, per_chat=30, window=60)
GROUP = ThreadKey("tg", "-100")
T0 = 1_000_000.0


def due_times(
    limiter: RateLimiter, arrivals: list[tuple[float, str, ThreadKey]], *, group: bool = True
) -> list[float]:
    return [
        limiter.pace(thread, sender, in_group=group, rate=RATE, now=now).due(now)
        for now, sender, thread in arrivals
    ]


def most_in_any_window(starts: list[float], window: float) -> int:
    starts = sorted(set(starts))
    return max(sum(1 for s in starts if w <= s < w + window) for w in starts)


def contents(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


# ---------------------------------------------------------------- the rate


def test_messages_within_the_rate_are_due_at_once() -> None:
    limiter = RateLimiter()
    paces = [limiter.pace(GROUP, "ada", in_group=True, rate=RATE, now=T0 + i) for i in range(10)]
    assert [p.due(T0 + i) for i, p in enumerate(paces)] == [T0 + i for i in range(10)]
    assert not any(p.deferred for p in paces)


def test_a_sender_over_the_rate_waits_for_the_window_and_the_rest_join_that_turn() -> None:
    limiter = RateLimiter()
    dues = due_times(limiter, [(T0 + i * 0.001, "ada", GROUP) for i in range(1000)])
    assert dues[:10] == [T0 + i * 0.001 for i in range(10)]
    # Everything after the tenth waits for the first to leave the window, all for one moment.
    assert set(dues[10:]) == {T0 + 60}
    last = limiter.pace(GROUP, "ada", in_group=True, rate=RATE, now=T0 + 2)
    assert (last.deferred, last.reason) == (True, "sender")


def test_a_steady_sender_gets_at_most_the_rate_of_turns_and_never_waits_past_a_window() -> None:
    limiter = RateLimiter()
    arrivals = [(T0 + i, "ada", GROUP) for i in range(600)]  # one a second for ten minutes
    dues = due_times(limiter, arrivals)
    # Messages due at the same moment in one thread are one turn.
    assert most_in_any_window(dues, 60) <= RATE.per_user
    assert max(due - now for due, (now, _, _) in zip(dues, arrivals, strict=True)) <= 60


def test_messages_in_threads_of_their_own_each_count() -> None:
    # Slack opens a thread under every top-level message: nothing there coalesces.
    limiter = RateLimiter()
    threads = [ThreadKey("slack", "C1", f"17000.{i}") for i in range(25)]
    dues = due_times(limiter, [(T0 + i * 0.01, "ada", t) for i, t in enumerate(threads)])
    assert most_in_any_window(dues, 60) <= RATE.per_user
    assert len(set(dues)) == 25


def test_other_members_are_not_slowed_by_one_and_take_the_waiting_messages_along() -> None:
    limiter = RateLimiter()
    due_times(limiter, [(T0, "ada", GROUP)] * 11)
    bob = limiter.pace(GROUP, "bob", in_group=True, rate=RATE, now=T0 + 1)
    assert bob.due(T0 + 1) == T0 + 1 and not bob.deferred
    assert bob.catch_up  # Ada's waiting messages are answered in Bob's turn
    again = limiter.pace(GROUP, "bob", in_group=True, rate=RATE, now=T0 + 2)
    assert not again.catch_up


def test_the_chat_limit_counts_every_sender() -> None:
    limiter = RateLimiter()
    dues = due_times(limiter, [(T0, f"user{i}", GROUP) for i in range(31)])
    assert dues[:30] == [T0] * 30
    last = limiter.pace(GROUP, "someone", in_group=True, rate=RATE, now=T0 + 1)
    assert (last.deferred, last.reason, last.available_at) == (True, "chat", T0 + 60)


def test_in_a_dm_the_chat_limit_is_the_senders_limit() -> None:
    limiter = RateLimiter()
    dm = ThreadKey("tg", "42")
    dues = due_times(limiter, [(T0, "42", dm)] * 31, group=False)
    assert dues[:30] == [T0] * 30
    assert dues[30] == T0 + 60


def test_zero_turns_a_limit_off() -> None:
    limiter = RateLimiter()
    off = RateLimitSettings(per_user=0, per_chat=0, window=60)
    paces = [limiter.pace(GROUP, "ada", in_group=True, rate=off, now=T0) for _ in range(500)]
    assert not any(p.deferred for p in paces)


# ---------------------------------------------------------------- the notice


def _event(text: str, *, event_id: str = "1", sender: str = "7", chat: ThreadKey = GROUP) -> InboundEvent:
    return InboundEvent(
        channel=chat.channel,
        event_id=event_id,
        thread_key=chat,
        chat_type="dm" if chat.chat_id.isdigit() else "group",
        sender=Sender(sender, "Ada" if sender == "7" else f"User{sender}"),
        text=text,
    )


def test_a_slowed_sender_is_told_once_per_window_with_the_wait(tmp_path: Path) -> None:
    limits = IntakeLimits(tmp_path, {"tg": ChannelLimits(rate=RATE)})
    told = []
    for i in range(200):
        now = T0 + i * 0.5  # a hundred seconds of two messages a second
        event = _event("hi")
        notice = limits.notice(event, limits.pace(event, now), now)
        if notice:
            told.append((now, notice))
    assert [now for now, _ in told] == [T0 + 5, T0 + 65]
    assert told[0][1] == (
        "Ada, you're sending messages faster than I can answer — "
        "I'll reply to all of them together in about 55 s."
    )


def test_the_notice_says_you_in_a_dm_and_speaks_to_the_chat_when_the_chat_is_over(tmp_path: Path) -> None:
    limits = IntakeLimits(tmp_path, {"tg": ChannelLimits(rate=RateLimitSettings(per_user=5, per_chat=2))})
    dm = ThreadKey("tg", "42")
    notices = [limits.notice(e, limits.pace(e, T0), T0) for e in [_event("x", chat=dm)] * 3]
    assert notices[:2] == [None, None]
    assert notices[2] is not None and notices[2].startswith("You're sending messages faster")
    group = [_event("x", sender=str(i)) for i in range(3)]
    notices = [limits.notice(e, limits.pace(e, T0), T0) for e in group]
    assert notices[2] is not None and notices[2].startswith("Messages are arriving here faster")


# ---------------------------------------------------------------- long text


async def test_long_text_is_cut_with_a_marker_and_the_full_text_kept(tmp_path: Path) -> None:
    original = "é" * 30_000 + "tail"
    event = _event(original, event_id="991")
    cut = await cut_long_text(event, 20_000, tmp_path)
    [attachment] = cut.attachments
    assert cut.text.startswith("é" * 20_000 + "\n\n[Cut here: this message has 30,004 characters")
    assert cut.text.endswith(f"The full text is attached as {attachment.name}.]")
    assert contents(attachment.path) == original
    assert attachment.size == len(original.encode())
    assert Path(attachment.path) == tmp_path / "tg" / "-100" / "message-991.txt"


def test_odd_ids_stay_inside_the_files_folder(tmp_path: Path) -> None:
    event = _event("x", event_id="../../etc/passwd", chat=ThreadKey("console", "../up", "a/b"))
    path = full_text_path(tmp_path, event)
    assert path.resolve().is_relative_to(tmp_path.resolve())
    assert ".." not in path.relative_to(tmp_path).parts


# ---------------------------------------------------------------- configuration


def test_chat_channels_are_limited_by_default_and_the_console_only_by_length(tmp_path: Path) -> None:
    (tmp_path / "talon.yaml").write_text(
        "channels:\n  - {name: console, type: console}\n  - {name: tg, type: telegram, token: abcdefgh}\n"
    )
    console, telegram = load_settings(tmp_path / "talon.yaml").channels
    assert console.max_inbound_chars == telegram.max_inbound_chars == 20_000
    assert telegram.rate_limit == RateLimitSettings(per_user=10, per_chat=30, window=60)
    assert not hasattr(console, "rate_limit")


def test_bad_limits_name_the_key_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "talon.yaml").write_text(
        "channels:\n"
        "  - {name: console, type: console, max_inbound_chars: 10, rate_limit: {per_user: 1}}\n"
        "  - name: tg\n    type: telegram\n    token: abcdefgh\n"
        "    rate_limit: {per_user: -1, window: 0, per_minute: 5}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "talon.yaml")
    assert caught.value.problems == [
        "channels[0].max_inbound_chars: must be at least 1000 characters (the default is 20000); "
        "longer messages are cut there and the full text is attached",
        "channels[0].rate_limit: unknown key; remove it or check its spelling",
        "channels[1].rate_limit.per_user: must be 0 or more messages per window (0 turns this limit off)",
        "channels[1].rate_limit.window: must be between 1 and 3600 seconds, e.g. window: 60",
        "channels[1].rate_limit.per_minute: unknown key; remove it or check its spelling",
    ]


# ---------------------------------------------------------------- through the pipeline


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def _pipeline(db: Database, tmp_path: Path, rate: RateLimitSettings = RATE, **kw: Any) -> Pipeline:
    limits = IntakeLimits(tmp_path / "files", {"tg": ChannelLimits(rate=rate)})
    return Pipeline(db, Bindings([Binding(channel="tg", persona="p")], ["p"]), limits=limits, **kw)


async def test_a_redelivered_long_message_is_one_message_and_one_file(db: Database, tmp_path: Path) -> None:
    pipeline = _pipeline(db, tmp_path)
    original = "0123456789" * 5000
    first = await pipeline.ingest(_event(original, event_id="77"))
    again = await pipeline.ingest(_event(original, event_id="77"))

    assert again.status is IntakeStatus.DUPLICATE
    (row,) = await fetch_rows(db, "SELECT text, attachments FROM messages WHERE id = ?", (first.message_id,))
    assert len(row["text"]) < 20_200 and row["text"].startswith(original[:20_000])
    [attachment] = json.loads(row["attachments"])
    assert attachment["path"] == f"/workspace/inbox/{first.message_id}/message-77.txt"
    folder = (
        thread_folder(tmp_path / "workspaces", "p", first.thread_id or 0) / "inbox" / str(first.message_id)
    )
    assert [p.name for p in folder.iterdir()] == ["message-77.txt"]
    assert contents(str(folder / "message-77.txt")) == original
    assert (await fetch_row(db, "SELECT COUNT(*) AS n FROM messages"))["n"] == 1


async def test_a_message_over_the_rate_is_stored_and_handed_to_the_queue_when_due(
    db: Database, tmp_path: Path
) -> None:
    queued: list[tuple[int, float]] = []
    notices: list[str] = []

    async def notice(thread_id: int, text: str) -> None:
        notices.append(text)

    pipeline = _pipeline(
        db,
        tmp_path,
        RateLimitSettings(per_user=2, per_chat=30, window=1),
        on_queued=lambda thread_id: queued.append((thread_id, time.time())),
        notice=notice,
    )
    started = time.time()
    results = [await pipeline.ingest(_event(f"m{i}", event_id=str(i))) for i in range(5)]

    assert {r.status for r in results} == {IntakeStatus.ACCEPTED}
    assert len(queued) == 2  # the two within the rate; the rest are not due yet
    rows = await fetch_rows(db, "SELECT available_at FROM queue_items ORDER BY id")
    assert [r["available_at"] > started + 0.9 for r in rows] == [False, False, True, True, True]
    assert len({r["available_at"] for r in rows[2:]}) == 1
    assert len(notices) == 1 and "faster than I can answer" in notices[0]
    async with asyncio.timeout(3):
        while len(queued) < 3:
            await asyncio.sleep(0.02)
    assert queued[2][1] >= rows[2]["available_at"] - 0.05


async def test_a_message_due_now_takes_the_waiting_ones_along(db: Database, tmp_path: Path) -> None:
    pipeline = _pipeline(db, tmp_path, RateLimitSettings(per_user=1, per_chat=30, window=60))
    for i in range(3):
        await pipeline.ingest(_event(f"ada {i}", event_id=f"a{i}"))
    before = time.time()
    await pipeline.ingest(_event("bob asks", event_id="b", sender="8"))

    rows = await fetch_rows(db, "SELECT available_at FROM queue_items WHERE status = 'pending'")
    assert len(rows) == 4
    assert all(r["available_at"] <= before + 1 for r in rows)


async def test_a_failing_notice_does_not_fail_the_intake(db: Database, tmp_path: Path) -> None:
    async def broken(thread_id: int, text: str) -> None:
        raise RuntimeError("outbox gone")

    pipeline = _pipeline(db, tmp_path, RateLimitSettings(per_user=1, per_chat=30, window=60), notice=broken)
    results = [await pipeline.ingest(_event(f"m{i}", event_id=str(i))) for i in range(3)]
    assert [r.status for r in results] == [IntakeStatus.ACCEPTED] * 3
