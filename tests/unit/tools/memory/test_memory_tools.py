"""memory_search and memory_update handlers on a real store: scopes follow the labels and the
turn's sender, limits and bad arguments are refused with what to send instead, supersede
keeps history out of search, and a malformed query never surfaces a database error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import ThreadKey
from gateway.config import Settings
from gateway.errors import RefusedError
from gateway.personas import Persona
from gateway.store.db import Database, open_database
from gateway.store.threads import upsert_thread
from tools.base import ToolContext, ToolError
from tools.memory import memory_search, memory_update
from tools.memory.common import MAX_FACT_CHARS, MAX_HOT_CHARS


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def _ctx(db: Database, label: str, sender: str | None = "ann", chat: str = "group") -> ToolContext:
    thread = await db.run_transaction(
        upsert_thread, ThreadKey("tg", chat), chat_type="group", persona="p", now=1.0
    )
    persona = Persona(
        name="p",
        provider="x",
        model="m",
        description=None,
        capabilities=(label,),
        system_prompt="",
        path=Path("."),
    )
    return ToolContext(thread_id=thread.id, persona=persona, db=db, settings=Settings(), sender_id=sender)


async def _fact(ctx: ToolContext, content: str, **extra: Any) -> dict[str, Any]:
    args = {"target": "fact", "action": "set", "category": "learning", "content": content, **extra}
    return await memory_update.handle(ctx, args)


async def _search(ctx: ToolContext, query: str, **extra: Any) -> list[dict[str, Any]]:
    return (await memory_search.handle(ctx, {"query": query, **extra}))["results"]


async def test_the_default_scope_is_the_sender_then_the_thread(db: Database) -> None:
    assert (await _fact(await _ctx(db, "memory.access:persona"), "one"))["scope"] == "user"
    assert (await _fact(await _ctx(db, "memory.access:persona", sender=None), "two"))["scope"] == "thread"
    assert (await _fact(await _ctx(db, "memory.access:thread"), "three"))["scope"] == "thread"


async def test_a_scope_the_labels_do_not_open_is_refused(db: Database) -> None:
    ctx = await _ctx(db, "memory.access:user")
    with pytest.raises(ToolError, match=r"scope 'persona' is not open to this persona.*thread, user"):
        await _fact(ctx, "x", scope="persona")
    with pytest.raises(ToolError, match="scope 'persona' is not open"):
        await _search(ctx, "x", scope="persona")
    several = await _ctx(db, "memory.access:user", sender=None)
    with pytest.raises(ToolError, match="needs a turn that answers one person"):
        await _fact(several, "x", scope="user")


async def test_user_facts_follow_their_sender_across_threads_and_no_one_else(db: Database) -> None:
    ann = await _ctx(db, "memory.access:persona", chat="group")
    await _fact(ann, "Ann is allergic to peanuts")
    await _fact(ann, "The team deploys on Thursdays", scope="persona")
    ann_dm = await _ctx(db, "memory.access:persona", chat="ann-dm")
    bob = await _ctx(db, "memory.access:persona", sender="bob", chat="group")
    assert {r["content"] for r in await _search(ann_dm, "peanuts OR thursdays")} == {
        "Ann is allergic to peanuts",
        "The team deploys on Thursdays",
    }
    assert [r["content"] for r in await _search(bob, "peanuts OR thursdays")] == [
        "The team deploys on Thursdays"
    ]


async def test_supersede_replaces_a_fact_and_remove_deletes_it(db: Database) -> None:
    ctx = await _ctx(db, "memory.access:thread")
    old = await _fact(ctx, "The office is in Lisbon", category="convention")
    new = await memory_update.handle(
        ctx,
        {
            "target": "fact",
            "action": "supersede",
            "supersedes": old["id"],
            "content": "The office is in Porto",
        },
    )
    assert new["supersedes"] == old["id"] and new["category"] == "convention"
    assert [r["id"] for r in await _search(ctx, "office")] == [new["id"]]
    with pytest.raises(ToolError, match="already superseded"):
        await memory_update.handle(
            ctx, {"target": "fact", "action": "supersede", "supersedes": old["id"], "content": "again"}
        )
    await memory_update.handle(ctx, {"target": "fact", "action": "remove", "id": new["id"]})
    assert await _search(ctx, "office") == []
    with pytest.raises(ToolError, match=r"no fact .* memory_search shows fact ids"):
        await memory_update.handle(ctx, {"target": "fact", "action": "remove", "id": new["id"]})


async def test_another_scopes_fact_cannot_be_removed(db: Database) -> None:
    ann = await _ctx(db, "memory.access:user")
    fact = await _fact(ann, "private")
    bob = await _ctx(db, "memory.access:user", sender="bob")
    with pytest.raises(ToolError, match="no fact"):
        await memory_update.handle(bob, {"target": "fact", "action": "remove", "id": fact["id"]})


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"target": "fact", "action": "set", "content": "x"}, "category is required"),
        ({"target": "fact", "action": "set", "category": "mood", "content": "x"}, "category must be one of"),
        ({"target": "fact", "action": "set", "category": "learning"}, "content is required"),
        (
            {
                "target": "fact",
                "action": "set",
                "category": "learning",
                "content": "x" * (MAX_FACT_CHARS + 1),
            },
            "keep it under",
        ),
        ({"target": "fact", "action": "supersede", "content": "x"}, "supersedes is required"),
        ({"target": "fact", "action": "remove"}, "id is required"),
        ({"target": "hot", "action": "remove"}, "hot memory supports only action 'set'"),
        ({"target": "hot", "action": "set"}, "content is required"),
        (
            {"target": "hot", "action": "set", "content": "x" * (MAX_HOT_CHARS + 1)},
            f"keep it under {MAX_HOT_CHARS}",
        ),
        ({"target": "archive", "action": "set"}, "target is required"),
    ],
)
async def test_bad_update_arguments_say_what_to_send(db: Database, args: dict[str, Any], says: str) -> None:
    with pytest.raises(ToolError) as caught:
        await memory_update.handle(await _ctx(db, "memory.access:thread"), args)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"query": "a AND"}, "ends with an operator"),
        ({"query": "x", "limit": 0}, "limit must be a whole number from 1 to 50"),
        ({"query": "x", "since": "last tuesday"}, "since must be an ISO date"),
        ({"query": "x", "category": "gossip"}, "category must be one of"),
    ],
)
async def test_bad_search_arguments_say_what_to_send(db: Database, args: dict[str, Any], says: str) -> None:
    with pytest.raises(RefusedError) as caught:  # ToolError, or the query parser's QueryError
        await memory_search.handle(await _ctx(db, "memory.access:thread"), args)
    assert says in str(caught.value)


async def test_search_filters_by_category_and_date_and_cuts_long_items(db: Database) -> None:
    ctx = await _ctx(db, "memory.access:thread")
    await _fact(ctx, "Use tabs in the billing repo", category="convention")
    await _fact(ctx, "Billing " + "long " * 400, category="learning")
    assert [r["category"] for r in await _search(ctx, "billing", category="convention")] == ["convention"]
    long = [r for r in await _search(ctx, "billing") if r["category"] == "learning"]
    assert long[0]["truncated"] and len(long[0]["content"]) == 1001
    assert await _search(ctx, "billing", since="2999-01-01") == []
    assert len(await _search(ctx, "billing", since="2000-01-01")) == 2


async def test_hot_memory_is_set_and_cleared(db: Database) -> None:
    ctx = await _ctx(db, "memory.access:thread")
    assert (await memory_update.handle(ctx, {"target": "hot", "action": "set", "content": "Be brief"}))[
        "chars"
    ] == 8
    cleared = await memory_update.handle(ctx, {"target": "hot", "action": "set", "content": ""})
    assert cleared["cleared"] is True


async def test_a_search_that_ranks_too_long_is_stopped_with_advice(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = await _ctx(db, "memory.access:thread")
    for i in range(50):
        await _fact(ctx, f"common words number {i}")
    monkeypatch.setattr("gateway.store.facts.SEARCH_SECONDS", -1.0)
    monkeypatch.setattr("gateway.store.facts.PROGRESS_STEPS", 10)
    with pytest.raises(RefusedError, match="matched too much to rank"):
        await _search(ctx, "common")
    monkeypatch.undo()
    assert len(await _search(ctx, "common")) == 10
