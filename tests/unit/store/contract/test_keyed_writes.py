"""Keyed writes (Database.run_keyed), which PostgreSQL may interleave within a group commit:
each caller gets its own outcome and sees its own writes, writes of one key run one after the
other, a write without a key runs alone between the others, and one that fails fails alone."""

from __future__ import annotations

import asyncio
import sqlite3

from tests.unit.store.contract.conftest import Backend

_INSERT = (
    "INSERT INTO threads (channel, chat_id, topic, chat_type, created_at, updated_at) "
    "VALUES ('tg', ?, ?, 'dm', 0, 0) RETURNING id"
)


def _add_topics(conn: sqlite3.Connection, chat: str, topics: int) -> tuple[list[int], int]:
    """Several statements, each waited for: the new ids, and how many rows the chat has now."""
    ids = [int(conn.execute(_INSERT, (chat, str(t))).fetchone()[0]) for t in range(topics)]
    count = conn.execute("SELECT count(*) FROM threads WHERE chat_id = ?", (chat,)).fetchone()[0]
    return ids, int(count)


def _next_title(conn: sqlite3.Connection, chat: str, topic: str) -> int:
    """Read, then write what was read plus one (in a column nothing keeps unique): right only
    if no other write of the chat runs in between."""
    row = conn.execute(
        "SELECT max(CAST(title AS INTEGER)) FROM threads WHERE chat_id = ?", (chat,)
    ).fetchone()
    following = 0 if row[0] is None else int(row[0]) + 1
    conn.execute(
        "INSERT INTO threads (channel, chat_id, topic, chat_type, title, created_at, updated_at) "
        "VALUES ('tg', ?, ?, 'dm', ?, 0, 0)",
        (chat, topic, str(following)),
    )
    return following


def _count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM threads").fetchone()[0])


async def test_keyed_writes_of_one_group_each_get_their_own_outcome(store: Backend) -> None:
    writes = [store.write_keyed(("chat", c), _add_topics, f"c{c}", 3) for c in range(12)]
    outcomes = await asyncio.gather(*writes)
    assert [count for _, count in outcomes] == [3] * 12  # each saw its own rows, and only those
    ids = [i for new, _ in outcomes for i in new]
    assert len(set(ids)) == 36
    assert await store.read(_count) == 36


async def test_writes_of_one_key_run_one_after_the_other(store: Backend) -> None:
    writes = [store.write_keyed(("chat", "same"), _next_title, "same", str(n)) for n in range(6)]
    writes += [store.write_keyed(("chat", "other"), _next_title, "other", str(n)) for n in range(3)]
    assert await asyncio.gather(*writes) == [0, 1, 2, 3, 4, 5, 0, 1, 2]


async def test_a_write_without_a_key_sees_the_writes_before_it_and_none_after(store: Backend) -> None:
    before = [store.write_keyed(("chat", c), _add_topics, f"b{c}", 2) for c in range(3)]
    alone = store.write(_count)
    after = [store.write_keyed(("chat", c), _add_topics, f"a{c}", 2) for c in range(3)]
    outcomes = await asyncio.gather(*before, alone, *after)
    assert outcomes[3] == 6
    assert await store.read(_count) == 12


def _add_or_fail(conn: sqlite3.Connection, chat: str) -> int:
    thread_id = int(conn.execute(_INSERT, (chat, "x")).fetchone()[0])
    if chat == "bad":
        conn.execute(_INSERT, (chat, "x")).fetchone()  # the same topic again: refused
    return thread_id


async def test_a_failing_keyed_write_fails_alone(store: Backend) -> None:
    chats = ["c0", "c1", "bad", "c3", "c4"]
    outcomes = await asyncio.gather(
        *(store.write_keyed(("chat", c), _add_or_fail, c) for c in chats), return_exceptions=True
    )
    assert [type(o).__name__ for o in outcomes] == ["int", "int", "IntegrityError", "int", "int"]
    assert await store.read(_count) == 4
