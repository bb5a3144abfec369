"""Writes that share a group commit: one that fails, even by a statement nobody read back
(PostgreSQL reports it only at the commit), fails for its caller alone."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from tests.unit.store.contract.conftest import Backend

_INSERT = (
    "INSERT INTO threads (id, channel, chat_id, topic, chat_type, created_at, updated_at) "
    "VALUES (?, 'tg', ?, '', 'dm', 0, 0)"
)


def _insert(conn: sqlite3.Connection, thread_id: int) -> None:
    conn.execute(_INSERT, (thread_id, str(thread_id)))  # its cursor is never read


def _count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM threads").fetchone()[0])


async def test_a_failing_write_fails_alone_and_the_rest_of_its_group_commits(store: Backend) -> None:
    await store.write(_insert, 1)
    writes = [store.write(_insert, n) for n in (2, 3, 1, 4, 5)]  # 1 is taken
    outcomes = await asyncio.gather(*writes, return_exceptions=True)
    assert [type(o).__name__ for o in outcomes] == [
        "NoneType",
        "NoneType",
        "IntegrityError",
        "NoneType",
        "NoneType",
    ]
    assert await store.read(_count) == 5
    with pytest.raises(sqlite3.IntegrityError):
        await store.write(_insert, 2)  # alone in its group
    await store.write(_insert, 6)
    assert await store.read(_count) == 6
