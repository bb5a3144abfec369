"""A database with what the web console shows: threads with messages (one carrying markup
that must stay inert), a run with its trace and a tool call, memory, a dead letter and a
schedule. Shared by the console's tests and its benchmark."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from connectors.base import ThreadKey
from gateway.store.db import Database
from gateway.store.memory import put_item
from gateway.store.messages import add_message
from gateway.store.queue import enqueue_message
from gateway.store.runs import start_run
from gateway.store.schedules import create_schedule
from gateway.store.threads import upsert_thread

HOSTILE = (
    '<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2"> '
    '[click me](javascript:window.pwned=3) <a href="javascript:window.pwned=4">link</a> <b>bold?</b>'
)


@dataclass(frozen=True)
class Seeded:
    thread_id: int
    run_id: int
    dead_letter: int
    schedule_id: str


def seed(conn: sqlite3.Connection, *, threads: int = 1, messages: int = 4) -> Seeded:
    """``threads`` threads of ``messages`` messages each; the first holds the run, the hostile
    message, memory, the dead letter and the schedule."""
    now = time.time()
    first = 0
    for t in range(threads):
        thread_id = upsert_thread(
            conn, ThreadKey("console", f"chat-{t}", None), chat_type="dm", persona="assistant", now=now
        ).id
        first = first or thread_id
        rows = [
            (thread_id, "user" if i % 2 == 0 else "assistant", f"message {i} of thread {t}", now + i * 1e-3)
            for i in range(messages)
        ]
        conn.executemany(
            "INSERT INTO messages (thread_id, role, text, created_at, sender_name) VALUES (?, ?, ?, ?, 'ann')",
            rows,
        )
    hostile = add_message(
        conn, first, "user", HOSTILE, created_at=now + 10, sender_id="u1", sender_name="mallory"
    )
    run_id = start_run(conn, first, "assistant", "test-model", now + 11, status="completed")
    conn.execute(
        "UPDATE runs SET ended_at = ?, model_calls = 2, input_tokens = 120, output_tokens = 30 WHERE id = ?",
        (now + 12, run_id),
    )
    events = [
        (
            run_id,
            run_id,
            first,
            "assistant",
            1,
            "model_call",
            "test-model",
            now + 11.1,
            420.0,
            None,
            json.dumps({"input_tokens": 100}),
        ),
        (
            run_id,
            run_id,
            first,
            "assistant",
            2,
            "tool_call",
            "memory_update",
            now + 11.5,
            12.0,
            None,
            json.dumps({"decision": "allowed"}),
        ),
        (
            run_id,
            run_id,
            first,
            "assistant",
            3,
            "model_call",
            "test-model",
            now + 11.6,
            300.0,
            None,
            json.dumps({"input_tokens": 20}),
        ),
    ]
    conn.executemany(
        "INSERT INTO run_events (run_id, root_run_id, thread_id, persona, seq, kind, name, at, duration_ms, "
        "error_class, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        events,
    )
    add_message(
        conn,
        first,
        "assistant",
        "The answer is **42**.",
        created_at=now + 12,
        run_id=run_id,
        persona="assistant",
    )
    put_item(conn, first, "assistant", "favourite", "fact", "blue <i>really</i>", now)
    item = enqueue_message(conn, first, hostile, available_at=now, now=now)
    conn.execute(
        "UPDATE queue_items SET status = 'dead', attempts = 5, last_error = 'model kept failing' WHERE id = ?",
        (item,),
    )
    schedule = create_schedule(
        conn,
        persona="assistant",
        thread_id=first,
        label="daily digest",
        cron_expr="0 9 * * *",
        run_at=None,
        timezone="UTC",
        prompt="Summarize the day",
        prompt_file=None,
        next_run_at=now + 3600,
        now=now,
    )
    return Seeded(first, run_id, item, schedule.id)


async def seed_database(db: Database, **kwargs: int) -> Seeded:
    return await db.run_transaction(lambda conn: seed(conn, **kwargs))
