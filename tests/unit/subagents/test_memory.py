"""memory-retriever and memory-groomer: thread-scoped data, keyword shortcut, safe rewrites."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from gateway.errors import RefusedError
from gateway.store.db import Database
from tests.fakes.model_api import FakeAnthropic
from tests.store_helpers import fetch_row, fetch_rows
from tests.unit.subagents.support import (
    Env,
    add_memory,
    add_thread,
    json_reply,
    make_persona,
    memory,
    request_text,
)
from tools.base import ToolContext
from tools.host.subagent_invoke import TOOL

ITEMS = {
    "user.timezone": "Europe/Berlin",
    "project.deadline": "The launch deadline is 31 March",
    "lunch": "Likes ramen",
    "pets": "Has a cat called Miso",
}


async def invoke(ctx: ToolContext, name: str, **input: Any) -> dict[str, Any]:
    return await TOOL.handler(ctx, {"name": name, "input": input})


async def setup(env: Env, db: Database, items: dict[str, str] = ITEMS) -> ToolContext:
    thread = await add_thread(db, "C1")
    other = await add_thread(db, "C2")
    await add_memory(db, thread, items)
    await add_memory(db, other, {"secret.plan": "Other thread's deadline plan", "x": "deadline deadline"})
    return env.ctx(db, thread, make_persona(env.root))


async def test_few_keyword_matches_skip_the_model(env: Env, anthropic: FakeAnthropic, db: Database) -> None:
    ctx = await setup(env, db)
    result = await invoke(ctx, "memory-retriever", query="When is the deadline?")
    assert anthropic.requests == []
    assert result["data"]["method"] == "keyword"
    assert [i["key"] for i in result["data"]["items"]] == ["project.deadline"]
    assert result["data"]["items"][0]["value"] == "The launch deadline is 31 March"
    assert result["usage"]["model_calls"] == 0
    assert result["summary"] == "1 relevant memory item (keyword match): project.deadline"


async def test_many_matches_are_ranked_by_the_model_on_this_threads_items_only(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    items = {f"meeting.{i}": f"Meeting notes number {i} about the budget" for i in range(6)}
    ctx = await setup(env, db, {**items, "lunch": "Likes ramen"})
    anthropic.script(
        json_reply(
            {
                "items": [
                    {"key": "meeting.4", "relevance": 0.9, "reason": "budget decided"},
                    {"key": "secret.plan", "relevance": 0.8},  # another thread's key: never returned
                    {"key": "meeting.1", "relevance": 0.5},
                ]
            }
        )
    )
    result = await invoke(ctx, "memory-retriever", query="budget meeting", limit=5)
    [body] = anthropic.requests
    sent = request_text(body)
    assert "meeting.5" in sent and "Other thread" not in sent and "secret.plan" not in sent
    assert "ramen" not in sent  # only the keyword matches go to the model
    assert body["model"] == "claude-haiku-4-5"
    data = result["data"]
    assert data["method"] == "model"
    assert [(i["key"], i["relevance"]) for i in data["items"]] == [("meeting.4", 0.9), ("meeting.1", 0.5)]
    assert data["items"][0]["reason"] == "budget decided"


async def test_retriever_needs_a_query(env: Env, db: Database) -> None:
    ctx = await setup(env, db)
    with pytest.raises(RefusedError, match=r"memory-retriever needs input\.query as non-empty text"):
        await invoke(ctx, "memory-retriever")


async def _groom_env(env: Env, db: Database) -> ToolContext:
    ctx = await setup(env, db)
    await add_memory(db, ctx.thread_id, {"tz.note": "timezone is Berlin (CET)"})
    await add_memory(db, ctx.thread_id, {"summary": "Earlier we talked about cats."}, kind="summary")

    # An operation log: the order in which rows of this thread were written and deleted.
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE op_log (id INTEGER PRIMARY KEY, op TEXT, key TEXT)")
        conn.execute(
            "CREATE TRIGGER log_insert AFTER INSERT ON memory_items BEGIN "
            "INSERT INTO op_log (op, key) VALUES ('write', NEW.key); END"
        )
        conn.execute(
            "CREATE TRIGGER log_update AFTER UPDATE ON memory_items BEGIN "
            "INSERT INTO op_log (op, key) VALUES ('write', NEW.key); END"
        )
        conn.execute(
            "CREATE TRIGGER log_delete AFTER DELETE ON memory_items BEGIN "
            "INSERT INTO op_log (op, key) VALUES ('delete', OLD.key); END"
        )

    await db.run_transaction(write)
    return ctx


GROOMED = {
    "merged": [
        {
            "key": "user.timezone",
            "namespace": "fact",
            "value": "Europe/Berlin (CET)",
            "replaces": ["user.timezone", "tz.note"],
        },
        {"key": "user.food", "value": "Likes ramen", "replaces": ["lunch"]},
    ],
    "delete": ["pets"],
    "summary": "Merged the timezone notes, renamed lunch, dropped the pet.",
}


async def test_groomer_writes_merged_items_before_deleting_old_ones(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    ctx = await _groom_env(env, db)
    anthropic.script(json_reply(GROOMED))
    result = await invoke(ctx, "memory-groomer", instructions="keep the deadline")
    assert result["data"]["written"] == ["user.timezone", "user.food"]
    assert sorted(result["data"]["deleted"]) == ["lunch", "pets", "tz.note"]
    assert await memory(db, ctx.thread_id) == {
        "project.deadline": "The launch deadline is 31 March",
        "summary": "Earlier we talked about cats.",
        "user.food": "Likes ramen",
        "user.timezone": "Europe/Berlin (CET)",
    }
    log = [(r["op"], r["key"]) for r in await fetch_rows(db, "SELECT op, key FROM op_log ORDER BY id")]
    ops = [op for op, _ in log]
    assert ops == ["write", "write", "delete", "delete", "delete"], log
    sent = request_text(anthropic.requests[0])
    assert "keep the deadline" in sent
    assert "Earlier we talked about cats" not in sent  # the conversation summary is not groomed
    assert "Other thread" not in sent
    kind = await fetch_row(
        db, "SELECT type FROM memory_items WHERE thread_id = ? AND key = 'user.timezone'", (ctx.thread_id,)
    )
    assert kind["type"] == "fact"


async def test_a_failed_write_deletes_nothing(env: Env, anthropic: FakeAnthropic, db: Database) -> None:
    ctx = await _groom_env(env, db)
    before = await memory(db, ctx.thread_id)

    def write(conn: sqlite3.Connection) -> None:  # the disk "fails" on the second merged item
        conn.execute(
            "CREATE TRIGGER fail_food BEFORE INSERT ON memory_items WHEN NEW.key = 'user.food' "
            "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
        )

    await db.run_transaction(write)
    anthropic.script(json_reply(GROOMED))
    with pytest.raises(Exception, match="disk I/O error"):
        await invoke(ctx, "memory-groomer")
    assert await memory(db, ctx.thread_id) == before


async def test_groomer_output_naming_unknown_keys_is_repaired(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    ctx = await _groom_env(env, db)
    invented = {"merged": [], "delete": ["summary", "secret.plan"], "summary": "x"}
    anthropic.script(
        json_reply(invented), json_reply({"merged": [], "delete": ["pets"], "summary": "Dropped the pet."})
    )
    result = await invoke(ctx, "memory-groomer")
    assert "unknown: secret.plan, summary" in request_text(anthropic.requests[1])
    assert result["data"]["deleted"] == ["pets"]
    assert "pets" not in await memory(db, ctx.thread_id)
    other = await fetch_row(db, "SELECT id FROM threads WHERE chat_id = 'C2'")
    assert "secret.plan" in await memory(db, other["id"])


async def test_nothing_to_groom_skips_the_model(env: Env, anthropic: FakeAnthropic, db: Database) -> None:
    ctx = await setup(env, db, {"only": "one item"})
    result = await invoke(ctx, "memory-groomer")
    assert result["summary"] == "nothing to groom: this thread has 1 memory items"
    assert anthropic.requests == []
