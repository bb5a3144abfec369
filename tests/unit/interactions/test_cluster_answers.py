"""Questions across two cluster nodes on one PostgreSQL database, without the listener: what a
node learns of another's interactions by its heartbeat's sweep (a notification that was lost)
or by a notification handed to it. The waiting turn wakes as soon as it learns the answer, long
before its timeout; a reply on the other node is read as the answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import InboundEvent, IntakeStatus, Sender, ThreadKey
from gateway.interactions.kinds import READINGS
from gateway.interactions.questions import check_question, question_prompt
from gateway.interactions.service import Asked, Interactions
from gateway.store.interactions import InteractionRow
from gateway.store.threads import upsert_thread
from tests.store_helpers import cluster_node

KEY = ThreadKey("tg", "42")
SPEC = check_question({"question": "Ship it?", "type": "confirm"})
ASKED = Asked("question", SPEC, lambda pid: question_prompt(pid, SPEC, None), None, timeout=60)


@pytest.fixture
async def nodes(pg_server: Any, tmp_path: Path) -> AsyncIterator[tuple[Interactions, Interactions, int]]:
    url = pg_server.new_database()
    a, b = await cluster_node(url, tmp_path / "a", "a"), await cluster_node(url, tmp_path / "b", "b")
    thread = await a.run_transaction(
        lambda conn: upsert_thread(conn, KEY, chat_type="private", persona="p", now=time.time())
    )
    notices: list[str] = []

    async def notice(thread_id: int, text: str) -> list[int]:
        notices.append(text)
        return []

    try:
        yield (
            Interactions(a, {}, notice=notice, readings=READINGS, node="a"),
            Interactions(b, {}, notice=notice, readings=READINGS, node="b"),
            thread.id,
        )
    finally:
        await a.close()
        await b.close()


def _reply(text: str) -> InboundEvent:
    return InboundEvent("tg", f"e-{text}", KEY, "dm", Sender("u1", "Ann"), text)


async def _asking(asker: Interactions, thread_id: int) -> asyncio.Task[InteractionRow]:
    task = asyncio.create_task(asker.ask(thread_id, None, None, ASKED))
    async with asyncio.timeout(10):
        while not asker._waiters:  # the question is recorded and posted
            await asyncio.sleep(0.01)
    return task


async def test_a_reply_on_the_other_node_answers_and_the_sweep_wakes_the_waiting_turn(nodes: Any) -> None:
    a, b, thread_id = nodes
    asked = await _asking(a, thread_id)

    assert not b.wants(_reply("yes"))  # b has not heard of the question yet
    await b.sweep()
    assert b.wants(_reply("yes"))
    taken = await b.take(_reply("yes"))
    assert taken is not None and taken.status is IntakeStatus.STORED and taken.reply == "Got it: yes"
    assert not asked.done()

    await a.sweep()  # what a's heartbeat does when the notification was lost
    row = await asyncio.wait_for(asked, 5)
    assert row.state == "answered" and row.answer == {"action": "answer", "content": {"value": True}}
    await b.sweep()
    assert not b.wants(_reply("yes again"))  # answered: later replies go to the pipeline


async def test_a_notification_of_the_answer_wakes_the_waiting_turn(nodes: Any) -> None:
    a, b, thread_id = nodes
    asked = await _asking(a, thread_id)
    (interaction_id,) = a._waiters
    b.heard(interaction_id)  # the notification of the question
    await b.settle()
    assert (await b.take(_reply("no"))) is not None

    a.heard(interaction_id)  # the notification of the answer
    row = await asyncio.wait_for(asked, 5)
    assert row.state == "answered" and row.answer == {"action": "answer", "content": {"value": False}}


async def test_a_reply_to_a_question_closed_elsewhere_is_a_plain_message(nodes: Any) -> None:
    a, b, thread_id = nodes
    asked = await _asking(a, thread_id)
    await b.sweep()
    assert (await a.take(_reply("yes"))) is not None  # answered on a; b did not hear of it

    assert b.wants(_reply("hello"))
    assert await b.take(_reply("hello")) is None  # b reads it afresh: nothing open, a message
    assert (await asyncio.wait_for(asked, 5)).state == "answered"
