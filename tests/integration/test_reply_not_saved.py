"""A reply whose commit fails after the model answered is committed from the kept answer:
the model is not paid for twice, and the chat hears what really failed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from gateway.daemon import Gateway
from tests.fakes.model_api import FakeAnthropic
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import execute_sql, fetch_row, fetch_rows

# The database refuses the assistant message of a batch's first attempt, as a full disk
# would; the retry (attempt 2) may write it.
FAIL_FIRST_ATTEMPT = """
CREATE TRIGGER refuse_reply BEFORE INSERT ON messages
WHEN NEW.role = 'assistant' AND EXISTS (
    SELECT 1 FROM queue_items WHERE thread_id = NEW.thread_id AND status = 'leased' AND attempts = 1
)
BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END
"""
FAIL_ALWAYS = """
CREATE TRIGGER refuse_reply BEFORE INSERT ON messages WHEN NEW.role = 'assistant'
BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END
"""


async def runs_of(gw: Gateway, thread_id: int | None) -> list[dict[str, Any]]:
    rows = await fetch_rows(
        gw.components.db, "SELECT * FROM runs WHERE thread_id = ? ORDER BY id", (thread_id,)
    )
    return [dict(r) for r in rows]


async def test_a_reply_that_failed_to_save_is_sent_once_without_a_second_model_call(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            await execute_sql(gw.components.db, FAIL_FIRST_ATTEMPT)
            turn = await say(gw, "hello")
            await asyncio.sleep(0.3)  # a second delivery or model call would show by now
            runs = await runs_of(gw, turn.intake.thread_id)
            sent = await fetch_rows(
                gw.components.db, "SELECT text FROM outbox WHERE thread_id = ?", (turn.intake.thread_id,)
            )
            items = await fetch_rows(
                gw.components.db,
                "SELECT status, attempts FROM queue_items WHERE message_id = ?",
                (turn.intake.message_id,),
            )

    assert turn.status == "completed" and turn.texts == ["echo: hello"]
    assert len(fake.requests) == 1
    assert [r["text"] for r in sent] == ["echo: hello"]
    assert [(r["status"], r["attempts"]) for r in items] == [("done", 2)]
    # One run: completed by the retry, with the first attempt's failure and the kept answer.
    assert len(runs) == 1
    run = runs[0]
    assert run["status"] == "completed" and run["model_calls"] == 1
    assert run["error"].startswith("reply not saved: IntegrityError: database or disk is full")
    assert json.loads(run.get("answer") or "{}").get("text") == "echo: hello"


async def test_a_reply_that_never_saves_says_so_and_calls_the_model_once(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            await execute_sql(gw.components.db, FAIL_ALWAYS)
            turn = await say(gw, "hello")
            runs = await runs_of(gw, turn.intake.thread_id)

    assert turn.status == "failed"
    assert turn.text.startswith(
        "Sorry — I wrote a reply but could not save it: the database refused the write."
    )
    assert "model provider" not in turn.text
    assert len(fake.requests) == 1  # three attempts (max_attempts), one model call
    assert [(r["status"], r["model_calls"]) for r in runs] == [("failed", 1)]


async def test_messages_sent_while_a_reply_waits_to_be_saved_get_their_own_turn(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            extra={"queue": {"backoff_base": 0.5, "backoff_max": 1.0, "max_attempts": 3}},
        )
        async with running_gateway(config) as gw:
            await execute_sql(gw.components.db, FAIL_FIRST_ATTEMPT)
            first = asyncio.create_task(say(gw, "first"))
            async with asyncio.timeout(10):  # the first reply failed to save and waits for its retry
                while not await fetch_row(
                    gw.components.db, "SELECT 1 FROM queue_items WHERE last_error IS NOT NULL"
                ):
                    await asyncio.sleep(0.01)
            second = await say(gw, "second")
            first_turn = await first

    assert first_turn.texts == ["echo: first"]
    assert second.texts == ["echo: second"]
    assert [last_user_text(r) for r in fake.requests] == ["first", "second"]
    # The second turn saw the first reply in its transcript.
    assert [m["role"] for m in fake.requests[1]["messages"]] == ["user", "assistant", "user"]
