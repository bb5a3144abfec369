"""memory_access: per-thread memory items and the errors a model sees."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.store.db import Database, open_database
from tests.unit.scheduler.support import add_thread, make_ctx, make_persona
from tools.base import ToolContext, ToolError
from tools.host import memory_access
from tools.host.memory_access import MAX_VALUE_BYTES, TOOL


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


@pytest.fixture
async def ctx(db: Database, tmp_path: Path) -> ToolContext:
    return make_ctx(db, await add_thread(db, "C1"), make_persona(tmp_path), timezone="Europe/Berlin")


async def call(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await TOOL.handler(ctx, args)


def test_tool_identity() -> None:
    assert (TOOL.mcp_name, TOOL.internal_name, TOOL.prefix) == (
        "memory_access",
        "memory.access",
        "memory.access",
    )


async def test_write_then_read_then_overwrite(ctx: ToolContext) -> None:
    assert await call(ctx, operation="write", key="user.tz", value="Europe/Berlin", namespace="fact") == {
        "key": "user.tz",
        "namespace": "fact",
        "created": True,
    }
    item = await call(ctx, operation="read", key="user.tz")
    assert (item["key"], item["value"], item["namespace"]) == ("user.tz", "Europe/Berlin", "fact")
    assert datetime.fromisoformat(item["updated_at"]).utcoffset() is not None

    again = await call(ctx, operation="write", key="user.tz", value="Asia/Tokyo")
    assert again == {"key": "user.tz", "namespace": "fact", "created": False}  # type kept without a namespace
    assert (await call(ctx, operation="read", key="user.tz"))["value"] == "Asia/Tokyo"


async def test_write_without_key_generates_a_uuid(ctx: ToolContext) -> None:
    result = await call(ctx, operation="write", value="remember this")
    assert uuid.UUID(result["key"])
    assert result["created"] is True
    assert (await call(ctx, operation="read", key=result["key"]))["value"] == "remember this"


async def test_non_string_values_are_stored_as_json(ctx: ToolContext) -> None:
    value = {"deadline": "2030-01-31", "owners": ["ana", "bo"], "done": False}
    await call(ctx, operation="write", key="project", value=value)
    await call(ctx, operation="write", key="count", value=3)
    assert json.loads((await call(ctx, operation="read", key="project"))["value"]) == value
    assert (await call(ctx, operation="read", key="count"))["value"] == "3"


@pytest.mark.parametrize(
    ("namespace", "kind"),
    [
        ("fact", "fact"),
        ("summary", "summary"),
        ("note", "note"),
        ("Facts", "fact"),
        ("todo", "note"),
        (None, "note"),
    ],
)
async def test_namespaces_map_to_item_types(ctx: ToolContext, namespace: str | None, kind: str) -> None:
    assert (await call(ctx, operation="write", key="k", value="v", namespace=namespace))["namespace"] == kind


async def test_list_filters_by_namespace_and_truncates_values(ctx: ToolContext) -> None:
    await call(ctx, operation="write", key="long", value="x" * 1000, namespace="note")
    await call(ctx, operation="write", key="name", value="Ana", namespace="fact")
    listed = (await call(ctx, operation="list"))["items"]
    assert [i["key"] for i in listed] == ["name", "long"]
    long_value = next(i["value"] for i in listed if i["key"] == "long")
    assert 200 <= len(long_value) <= 210
    facts = (await call(ctx, operation="list", namespace="fact"))["items"]
    assert [(i["key"], i["namespace"], i["value"]) for i in facts] == [("name", "fact", "Ana")]


async def test_other_threads_items_are_invisible(ctx: ToolContext, db: Database, tmp_path: Path) -> None:
    other = make_ctx(db, await add_thread(db, "C2"), make_persona(tmp_path))
    await call(ctx, operation="write", key="secret", value="thread one only")

    assert (await call(other, operation="list"))["items"] == []
    with pytest.raises(ToolError, match="no memory item with key 'secret'"):
        await call(other, operation="read", key="secret")
    assert await call(other, operation="delete", key="secret") == {"deleted": False}
    assert (await call(other, operation="write", key="secret", value="mine"))["created"] is True

    assert (await call(ctx, operation="read", key="secret"))["value"] == "thread one only"
    assert (await call(other, operation="read", key="secret"))["value"] == "mine"


async def test_delete(ctx: ToolContext) -> None:
    await call(ctx, operation="write", key="tmp", value="v")
    assert await call(ctx, operation="delete", key="tmp") == {"deleted": True}
    assert await call(ctx, operation="delete", key="tmp") == {"deleted": False}
    with pytest.raises(ToolError, match="no memory item with key 'tmp'"):
        await call(ctx, operation="read", key="tmp")


async def test_a_full_thread_refuses_new_keys_but_takes_overwrites(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_access, "MAX_ITEMS_PER_THREAD", 2)
    await call(ctx, operation="write", key="a", value="1")
    await call(ctx, operation="write", key="b", value="2")
    with pytest.raises(ToolError, match="already has 2 memory items; delete or overwrite some first"):
        await call(ctx, operation="write", key="c", value="3")
    assert (await call(ctx, operation="write", key="b", value="two"))["created"] is False
    items = (await call(ctx, operation="list"))["items"]
    assert sorted((i["key"], i["value"]) for i in items) == [("a", "1"), ("b", "two")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "operation is required"),
        ({"operation": "update"}, "unknown operation 'update'"),
        ({"operation": "read"}, "read needs key"),
        ({"operation": "delete", "key": ""}, "delete needs key"),
        ({"operation": "write", "key": "k"}, "write needs value"),
        ({"operation": "write", "key": "k", "value": "x" * (MAX_VALUE_BYTES + 1)}, "the limit is 65536"),
        ({"operation": "read", "key": 5}, "key must be a string"),
        ({"operation": "list", "namespace": 3}, "namespace must be a string"),
    ],
)
async def test_bad_arguments_get_a_clear_error(ctx: ToolContext, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        await TOOL.handler(ctx, args)
    assert (await call(ctx, operation="list"))["items"] == []
