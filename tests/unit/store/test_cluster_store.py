"""The store under several cluster nodes: two open databases on one PostgreSQL server act as
two nodes. A thread runs one turn at a time across them, a lost node's work is taken back,
a thread's rows are sent by one node at a time, and a lease taken back cannot commit."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import RenderedChunk, ThreadKey
from gateway.store.db import Database
from gateway.store.interactions import (
    NewInteraction,
    claim_post,
    create_interaction,
    settle_interrupted_posts,
)
from gateway.store.messages import add_message
from gateway.store.nodes import beat, leave, list_nodes, reap
from gateway.store.outbox import ThreadAddress, claim_next, enqueue_chunks, mark_sending, release_thread
from gateway.store.pg_connection import connect
from gateway.store.postgres import NodeLockedError, open_postgres
from gateway.store.queue import Batch, LeaseLostError, complete_items, enqueue_message, lease_batch
from gateway.store.runs import RunSpend, complete_run, start_run
from gateway.store.threads import upsert_thread
from gateway.store.usage import rollup_totals
from tests.store_helpers import cluster_node

FAILOVER = 15.0


@pytest.fixture
async def two_nodes(pg_server: Any, tmp_path: Path) -> AsyncIterator[tuple[str, Database, Database]]:
    url = pg_server.new_database()
    a = await cluster_node(url, tmp_path / "a", "a")
    b = await cluster_node(url, tmp_path / "b", "b")
    try:
        yield url, a, b
    finally:
        await a.close()
        await b.close()


def _message(conn: sqlite3.Connection, chat: str, text: str) -> int:
    now = time.time()
    thread = upsert_thread(conn, ThreadKey("tg", chat), chat_type="private", persona="p", now=now)
    message_id = add_message(conn, thread.id, "user", text, created_at=now)
    enqueue_message(conn, thread.id, message_id, available_at=now, now=now)
    return thread.id


async def test_a_single_node_and_a_cluster_keep_each_other_out(two_nodes: Any, tmp_path: Path) -> None:
    url, _, _ = two_nodes

    with pytest.raises(NodeLockedError, match=r"database\.cluster: true on every node"):
        await open_postgres(url, tmp_path, node=True)


async def test_a_thread_another_node_leased_is_left_to_it(two_nodes: Any) -> None:
    _, a, b = two_nodes
    thread_id = await a.run_transaction(_message, "1", "first")
    first = await a.run_transaction(lease_batch, thread_id, 600, time.time(), "a")
    await b.run_transaction(_message, "1", "second")

    assert isinstance(first, Batch) and first.node == "a"
    assert await b.run_transaction(lease_batch, thread_id, 600, time.time(), "b") is None

    await a.run_transaction(complete_items, first.ids, None, time.time(), "a")
    second = await b.run_transaction(lease_batch, thread_id, 600, time.time(), "b")
    assert isinstance(second, Batch) and second.node == "b" and len(second.items) == 1


async def test_nodes_leasing_at_once_never_lease_an_item_twice(two_nodes: Any) -> None:
    _, a, b = two_nodes
    threads = [await a.run_transaction(_message, str(chat), "hi") for chat in range(40)]

    async def lease_all(db: Database, node: str) -> list[Batch]:
        got = await asyncio.gather(
            *(db.run_transaction(lease_batch, t, 600, time.time(), node) for t in threads)
        )
        return [g for g in got if isinstance(g, Batch)]

    by_a, by_b = await asyncio.gather(lease_all(a, "a"), lease_all(b, "b"))
    leased = [item for batch in by_a + by_b for item in batch.ids]

    assert sorted(leased) == sorted(set(leased)) and len(leased) == len(threads)


async def test_a_lost_nodes_leases_runs_and_sends_are_taken_back(pg_server: Any, tmp_path: Path) -> None:
    url = pg_server.new_database()
    a = await cluster_node(url, tmp_path / "a", "a")
    b = await cluster_node(url, tmp_path / "b", "b")
    try:
        thread_id = await b.run_transaction(_message, "7", "hello")
        batch = await b.run_transaction(lease_batch, thread_id, 600, time.time(), "b")
        assert isinstance(batch, Batch)
        run_id = await b.run_transaction(start_run, thread_id, "p", "m:x", time.time())
        address = ThreadAddress(thread_id, ThreadKey("tg", "7"))
        (row_id,) = await b.run_transaction(enqueue_chunks, address, [RenderedChunk("x", "x", "plain")])
        row = await b.run_transaction(claim_next, thread_id, "b", time.time() + FAILOVER, time.time())
        assert row is not None and await b.run_transaction(mark_sending, row_id, "b")
        nothing = await a.run_transaction(reap, 3, time.time(), FAILOVER)
        assert not nothing
    finally:
        await b.close()  # as a kill -9 does: the server frees b's lock with its connection

    try:
        # The server ends b's session (and frees its lock) a moment after the socket closes.
        async with asyncio.timeout(10):
            while not (reaped := await a.run_transaction(reap, 3, time.time(), FAILOVER)):
                await asyncio.sleep(0.05)
        assert reaped.nodes == ("b",) and reaped.released == 1 and reaped.outbox_threads == (thread_id,)
        again = await a.run_transaction(lease_batch, thread_id, 600, time.time(), "a")
        assert isinstance(again, Batch) and again.ids == batch.ids and again.attempts == 2
        status = await a.read(
            lambda c: c.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        )
        assert status[0] == "interrupted"
        assert [n.node_id for n in await a.read(list_nodes, time.time(), FAILOVER)] == ["a"]
    finally:
        await a.close()


async def test_a_node_that_was_taken_back_cannot_commit_and_learns_it_from_its_heartbeat(
    two_nodes: Any,
) -> None:
    _, a, b = two_nodes
    thread_id = await a.run_transaction(_message, "9", "hi")
    batch = await a.run_transaction(lease_batch, thread_id, 600, time.time(), "a")
    assert isinstance(batch, Batch)
    await b.run_transaction(leave, "a")  # what b's reaper does to a node silent too long
    await b.run_transaction(reap, 3, time.time(), FAILOVER)

    with pytest.raises(LeaseLostError):
        await a.run_transaction(complete_items, batch.ids, None, time.time(), "a")
    assert await a.run_transaction(beat, "a", time.time(), time.time() + FAILOVER) is False
    assert await b.run_transaction(beat, "b", time.time(), time.time() + FAILOVER) is True


async def test_one_node_at_a_time_sends_a_threads_rows(two_nodes: Any) -> None:
    _, a, b = two_nodes
    thread_id = await a.run_transaction(_message, "5", "hi")
    address = ThreadAddress(thread_id, ThreadKey("tg", "5"))
    first, second = await a.run_transaction(
        enqueue_chunks, address, [RenderedChunk("1", "1", "plain"), RenderedChunk("2", "2", "plain")]
    )
    now = time.time()

    row = await a.run_transaction(claim_next, thread_id, "a", now + FAILOVER, now)
    assert row is not None and row.id == first
    assert await b.run_transaction(claim_next, thread_id, "b", now + FAILOVER, now) is None
    assert not await b.run_transaction(mark_sending, first, "b")
    # a lets go only once nothing is left: with a row pending it keeps the thread.
    kept = await a.run_transaction(release_thread, thread_id, "a")
    assert kept is not None and kept.id == first
    # A claim its node stopped renewing is taken over.
    later = now + FAILOVER + 1
    taken = await b.run_transaction(claim_next, thread_id, "b", later + FAILOVER, later)
    assert taken is not None and taken.id == first and second > first
    assert not await a.run_transaction(mark_sending, first, "a")


async def _posting(db: Database, chat: str, interaction_id: str) -> None:
    """A run on ``db``'s node asks a question and begins posting its prompt."""
    thread_id = await db.run_transaction(_message, chat, "ask")
    run_id = await db.run_transaction(start_run, thread_id, "p", "m:x", time.time())
    spec = {"question": "Ship it?", "type": "confirm"}
    new = NewInteraction(interaction_id, thread_id, run_id, "call", "question", spec, None, time.time() + 60)
    await db.run_transaction(create_interaction, new, time.time())
    assert await db.run_transaction(claim_post, interaction_id)


async def test_a_starting_node_settles_only_the_prompts_no_live_node_is_posting(two_nodes: Any) -> None:
    _, a, b = two_nodes
    await _posting(a, "11", "asked-on-a")
    await _posting(b, "12", "asked-on-b")

    # b starting again: a may be posting its prompt this moment; b's own was cut short.
    assert await b.run_transaction(settle_interrupted_posts, "b") == ["asked-on-b"]
    # Once a has left the cluster, its prompt is settled by whichever node starts next.
    await b.run_transaction(leave, "a")
    assert await b.run_transaction(settle_interrupted_posts, "b") == ["asked-on-a"]


async def test_nodes_completing_runs_of_one_persona_at_once_do_not_conflict(two_nodes: Any) -> None:
    # Every reply adds to its persona's usage of the day: with one row per day, the second of two
    # nodes' overlapping commits failed on it and ran again. Each node now adds to its own shard.
    url, a, _ = two_nodes
    thread = await a.run_transaction(_message, "7", "hi")
    runs = [await a.run_transaction(start_run, thread, "p", "m:x", time.time()) for _ in range(2)]
    spend = RunSpend(cost=0.5, sender_id="u", channel="tg", persona="p", periods=("2026-12-03", "2026-12"))
    nodes = [connect(url, application_name=name) for name in ("a", "b")]
    try:
        for name, conn in zip(("a", "b"), nodes, strict=True):
            conn.execute("SELECT set_config('talon.node', ?, false)", (name,)).fetchone()
            conn.execute("SET enable_seqscan = off")  # as a cluster node's writer
            conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        nodes[1].execute("SELECT 1").fetchone()  # b's snapshot is taken before a commits
        for conn, run_id in zip(nodes, runs, strict=True):
            complete_run(
                conn,
                run_id,
                model="m:x",
                input_tokens=7,
                output_tokens=3,
                model_calls=1,
                now=time.time(),
                spend=spend,
            )
            conn.commit()
    finally:
        for conn in nodes:
            conn.close()

    day, month = await a.read(rollup_totals, [("persona", "p", "2026-12-03"), ("user", "u", "2026-12")])
    assert (day.runs, day.tokens, day.cost) == (2, 20, 1.0)
    assert (month.runs, month.tokens) == (2, 20)
