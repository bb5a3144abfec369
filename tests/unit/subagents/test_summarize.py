"""Context summarization: long threads fold into a summary item and later turns read less."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable

import pytest

from gateway.runtime.context import build_transcript, transcript_rows
from gateway.store.db import Database
from gateway.store.threads import get_thread
from gateway.subagents import Summarizer, context_start, maybe_summarize
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI
from tests.store_helpers import execute_sql, fetch_row
from tests.unit.subagents.support import Env, add_thread, json_reply, make_persona, request_text

SUMMARY = {
    "summary": "Ana and the bot planned the launch.",
    "key_facts": ["Launch is on 31 March"],
    "open_threads": ["Who writes the press release?"],
}
BUDGET = 1000  # tokens; summarization starts above 600


async def add_messages(db: Database, thread_id: int, count: int, *, start: int = 0) -> list[int]:
    ids = []

    def write(conn: sqlite3.Connection) -> None:
        for i in range(start, start + count):
            role = "user" if i % 2 == 0 else "assistant"
            text = f"message {i}: " + "launch planning detail " * 8
            cursor = conn.execute(
                "INSERT INTO messages (thread_id, role, sender_name, text, created_at) VALUES (?, ?, ?, ?, ?)",
                (thread_id, role, "Ana" if role == "user" else None, text, i),
            )
            ids.append(int(cursor.lastrowid or 0))

    await db.run_transaction(write)
    return ids


async def thread_row(db: Database, thread_id: int):  # type: ignore[no-untyped-def]
    return await fetch_row(db, "SELECT * FROM threads WHERE id = ?", (thread_id,))


async def turn_transcript(db: Database, thread_id: int) -> list[str]:
    """What a turn's transcript holds, per the turn runner's use of :func:`context_start`."""
    row = await db.read(get_thread, thread_id)
    assert row is not None
    rows = await db.read(lambda conn: transcript_rows(conn, thread_id, context_from=context_start(row)))
    messages = build_transcript(rows, budget_tokens=100_000)
    return [m.content for m in messages]


async def test_a_long_thread_is_summarized_and_the_next_transcript_is_shorter(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    ids = await add_messages(db, thread, 30)
    before = await turn_transcript(db, thread)
    anthropic.script(json_reply(SUMMARY))
    update = await maybe_summarize(
        db, env.runner, thread, make_persona(env.root), context_tokens=BUDGET, share=0.6
    )
    assert update is not None
    row = await thread_row(db, thread)
    assert row["summarized_upto"] == update.summarized_upto == ids[update.messages - 1]
    assert 20 <= update.messages <= 28
    item = await fetch_row(
        db, "SELECT type, persona, value FROM memory_items WHERE thread_id = ? AND key = 'summary'", (thread,)
    )
    assert (item["type"], item["persona"]) == ("summary", "alice")
    assert item["value"] == (
        "Ana and the bot planned the launch.\n\nKey facts:\n- Launch is on 31 March\n\n"
        "Open threads:\n- Who writes the press release?"
    )
    after = await turn_transcript(db, thread)
    assert len("".join(after)) < len("".join(before)) / 2
    assert "message 29:" in after[-1]  # the newest messages stay verbatim
    assert not any("message 0:" in m for m in after)
    [body] = anthropic.requests
    assert body["model"] == "claude-sonnet-4-6"
    sent = request_text(body)
    assert "[user Ana] message 0:" in sent and "message 29:" not in sent
    assert "There is no earlier summary." in sent


async def test_a_short_thread_is_left_alone(env: Env, anthropic: FakeAnthropic, db: Database) -> None:
    thread = await add_thread(db)
    await add_messages(db, thread, 4)
    assert (
        await maybe_summarize(db, env.runner, thread, make_persona(env.root), context_tokens=BUDGET) is None
    )
    assert anthropic.requests == []


async def test_the_next_summary_builds_on_the_previous_one(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    persona = make_persona(env.root)
    await add_messages(db, thread, 30)
    anthropic.script(json_reply(SUMMARY), json_reply({**SUMMARY, "summary": "Even more planning."}))
    first = await maybe_summarize(db, env.runner, thread, persona, context_tokens=BUDGET)
    assert first is not None
    await add_messages(db, thread, 30, start=30)
    second = await maybe_summarize(db, env.runner, thread, persona, context_tokens=BUDGET)
    assert second is not None and second.summarized_upto > first.summarized_upto
    sent = request_text(anthropic.requests[1])
    assert "Earlier summary:\\nAna and the bot planned the launch." in sent
    assert "message 0:" not in sent  # already folded into the earlier summary
    count = await fetch_row(db, "SELECT COUNT(*) AS n FROM memory_items WHERE thread_id = ?", (thread,))
    assert count["n"] == 1


async def test_after_new_the_old_summary_is_not_carried_over(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    persona = make_persona(env.root)
    ids = await add_messages(db, thread, 30)
    anthropic.script(json_reply(SUMMARY), json_reply(SUMMARY))
    await maybe_summarize(db, env.runner, thread, persona, context_tokens=BUDGET)
    await execute_sql(db, "UPDATE threads SET context_from = ? WHERE id = ?", (ids[-1], thread))  # /new
    await add_messages(db, thread, 30, start=30)
    assert await maybe_summarize(db, env.runner, thread, persona, context_tokens=BUDGET) is not None
    assert "There is no earlier summary." in request_text(anthropic.requests[1])


async def test_messages_still_queued_are_not_summarized(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    ids = await add_messages(db, thread, 30)
    await execute_sql(
        db,
        "INSERT INTO queue_items (thread_id, message_id, available_at, created_at, updated_at) VALUES (?, ?, 0, 0, 0)",
        (thread, ids[5]),
    )
    anthropic.script(json_reply(SUMMARY))
    update = await maybe_summarize(db, env.runner, thread, make_persona(env.root), context_tokens=BUDGET)
    assert update is not None and update.summarized_upto == ids[4]


async def test_a_new_conversation_started_meanwhile_discards_the_summary(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    ids = await add_messages(db, thread, 30)
    anthropic.script(json_reply(SUMMARY, delay=0.3))
    task = asyncio.create_task(
        maybe_summarize(db, env.runner, thread, make_persona(env.root), context_tokens=BUDGET)
    )
    async with asyncio.timeout(5):
        while not anthropic.requests:
            await asyncio.sleep(0.01)
    await execute_sql(db, "UPDATE threads SET context_from = ? WHERE id = ?", (ids[-1], thread))
    assert await task is None
    assert await fetch_row(db, "SELECT 1 FROM memory_items WHERE thread_id = ?", (thread,)) is None
    assert (await thread_row(db, thread))["summarized_upto"] == 0


async def test_the_summarizer_runs_one_at_a_time_per_thread(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    thread = await add_thread(db)
    await add_messages(db, thread, 30)
    anthropic.script(json_reply(SUMMARY, delay=0.2))
    summarizer = Summarizer(db, env.runner, context_tokens=BUDGET, share=0.6)
    persona = make_persona(env.root)
    try:
        for _ in range(3):  # three turns end while the first summary is being written
            summarizer.schedule(thread, persona)
        async with asyncio.timeout(30):  # the first call imports the SDK
            while not anthropic.requests:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert len(anthropic.requests) == 1
        await summarizer.wait_idle()
        assert len(anthropic.requests) == 1  # the re-check found the thread short enough
        assert (await thread_row(db, thread))["summarized_upto"] > 0
    finally:
        await summarizer.aclose()


async def test_an_unavailable_summarizer_is_logged_once_and_never_raises(
    make: Callable[..., Env], openai: FakeOpenAI, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    env = make({"local": openai})
    thread = await add_thread(db)
    await add_messages(db, thread, 30)
    summarizer = Summarizer(db, env.runner, context_tokens=BUDGET)
    with caplog.at_level(logging.WARNING, logger="talon.subagents.summarize"):
        for _ in range(2):
            summarizer.schedule(thread, make_persona(env.root))
            await summarizer.wait_idle()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "long threads are not summarized" in warnings[0]
    assert "subagents.models.session-summarizer" in warnings[0]
    assert openai.requests == []
