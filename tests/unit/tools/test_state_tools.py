"""The state tools' handlers: results as the model reads them, the scopes the labels open, and
the errors bad or hostile arguments get."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.store.db import Database, open_database
from gateway.store.state import StateLimits
from tests.unit.scheduler.support import add_thread, make_ctx, make_persona
from tools.base import HostTool, ToolContext, ToolError
from tools.state import TOOLS, writing
from tools.state.common import MAX_VALUE_BYTES
from tools.state.reading import PAGE_BYTES

BY_NAME = {t.mcp_name: t for t in TOOLS}
OWN = ("state.read:persona", "state.write:persona")
TEAM = ("state.read:team", "state.write:team")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


def _ctx(db: Database, thread_id: int, tmp_path: Path, name: str, labels: tuple[str, ...]) -> ToolContext:
    persona = replace(make_persona(tmp_path, name), capabilities=labels)
    return make_ctx(db, thread_id, persona)


@pytest.fixture
async def ann(db: Database, tmp_path: Path) -> ToolContext:
    return _ctx(db, await add_thread(db, "C1", "ann"), tmp_path, "ann", TEAM)


@pytest.fixture
async def bob(db: Database, tmp_path: Path) -> ToolContext:
    return _ctx(db, await add_thread(db, "C2", "bob"), tmp_path, "bob", OWN)


async def call(ctx: ToolContext, tool: str, **args: Any) -> Any:
    result = await BY_NAME[tool].handler(ctx, args)
    json.dumps(result)  # what the bridge sends the model
    return result


def test_the_tools_carry_the_read_and_write_prefixes() -> None:
    prefixes = {t.mcp_name: t.prefix for t in TOOLS}
    assert prefixes == {
        "state_get": "state.read",
        "state_query": "state.read",
        "state_put": "state.write",
        "state_cas": "state.write",
        "state_delete": "state.write",
    }


async def test_put_get_and_delete_a_document_with_its_version(ann: ToolContext) -> None:
    assert await call(ann, "state_get", namespace="plans", key="launch") is None
    put = await call(
        ann, "state_put", namespace="plans", key="launch", value={"day": "Tue"}, metadata={"why": "x"}
    )
    assert put == {"namespace": "plans", "key": "launch", "scope": "persona", "version": 1}
    again = await call(ann, "state_put", namespace="plans", key="launch", value=["a", 1, None])
    assert again["version"] == 2
    got = await call(ann, "state_get", namespace="plans", key="launch")
    assert (got["value"], got["version"], got["written_by"], got["expires_at"]) == (
        ["a", 1, None],
        2,
        "ann",
        None,
    )
    assert "metadata" not in got and "why" not in json.dumps(got)
    assert await call(ann, "state_delete", namespace="plans", key="launch") == {"deleted": True}
    assert await call(ann, "state_delete", namespace="plans", key="launch") == {"deleted": False}
    assert await call(ann, "state_get", namespace="plans", key="launch") is None


async def test_cas_conflict_returns_the_current_version_and_value(ann: ToolContext) -> None:
    created = await call(ann, "state_cas", namespace="n", key="k", expected_version=0, value={"n": 1})
    assert created == {"matched": True, "version": 1}
    conflict = await call(ann, "state_cas", namespace="n", key="k", expected_version=0, value={"n": 9})
    assert conflict == {"matched": False, "version": 1, "value": {"n": 1}}
    absent = await call(ann, "state_cas", namespace="n", key="other", expected_version=4, value=1)
    assert absent == {"matched": False, "version": 0, "value": None}
    assert await call(ann, "state_cas", namespace="n", key="k", expected_version=1, value={"n": 2}) == {
        "matched": True,
        "version": 2,
    }


async def test_fifty_concurrent_writers_increment_a_counter_without_losing_one(ann: ToolContext) -> None:
    won: list[int] = []

    async def increment() -> None:
        current = await call(ann, "state_get", namespace="c", key="n", scope="team")
        version, value = (0, 0) if current is None else (current["version"], current["value"])
        while True:
            result = await call(
                ann,
                "state_cas",
                namespace="c",
                key="n",
                scope="team",
                expected_version=version,
                value=value + 1,
            )
            if result["matched"]:
                won.append(result["version"])
                return
            version, value = result["version"], result["value"]

    await asyncio.gather(*(increment() for _ in range(50)))
    final = await call(ann, "state_get", namespace="c", key="n", scope="team")
    assert (final["value"], final["version"]) == (50, 50)
    assert sorted(won) == list(range(1, 51))


async def test_persona_documents_are_private_and_team_documents_shared(
    ann: ToolContext, bob: ToolContext
) -> None:
    await call(ann, "state_put", namespace="n", key="k", value="ann's own")
    await call(ann, "state_put", namespace="n", key="k", value="for everyone", scope="team")
    assert await call(bob, "state_get", namespace="n", key="k") is None
    assert (await call(ann, "state_get", namespace="n", key="k"))["value"] == "ann's own"
    for tool, extra in (("state_get", {}), ("state_query", {}), ("state_put", {"value": 1})):
        with pytest.raises(ToolError) as refused:
            await call(bob, tool, namespace="n", key="k", scope="team", **extra)
        prefix = BY_NAME[tool].prefix
        assert f"needs the label '{prefix}:team'" in str(refused.value)
        assert f"{prefix}:persona" in str(refused.value)
    team = await call(ann, "state_get", namespace="n", key="k", scope="team")
    assert (team["value"], team["scope"]) == ("for everyone", "team")


async def test_query_pages_by_key_with_a_cursor(ann: ToolContext) -> None:
    for i in range(25):
        await call(ann, "state_put", namespace="jobs", key=f"job.{i:02d}", value=i)
    await call(ann, "state_put", namespace="jobs", key="lock", value=True)
    first = await call(ann, "state_query", namespace="jobs", key_prefix="job.")
    assert [d["key"] for d in first["documents"]] == [f"job.{i:02d}" for i in range(20)]
    assert first["next_cursor"] == "job.19"
    rest = await call(ann, "state_query", namespace="jobs", key_prefix="job.", cursor=first["next_cursor"])
    assert [d["value"] for d in rest["documents"]] == [20, 21, 22, 23, 24]
    assert rest["next_cursor"] is None
    whole = await call(ann, "state_query", namespace="jobs", limit=100)
    assert len(whole["documents"]) == 26 and whole["next_cursor"] is None


async def test_a_page_of_large_documents_ends_early_and_goes_on(ann: ToolContext) -> None:
    big = "x" * (MAX_VALUE_BYTES - 100)
    for i in range(6):
        await call(ann, "state_put", namespace="big", key=f"k{i}", value=big)
    pages, cursor = [], None
    while True:
        page = await call(ann, "state_query", namespace="big", limit=100, cursor=cursor)
        pages.append([d["key"] for d in page["documents"]])
        assert len(json.dumps(page)) < PAGE_BYTES + MAX_VALUE_BYTES
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [4, 2]
    assert [k for p in pages for k in p] == [f"k{i}" for i in range(6)]


async def test_an_expired_document_reads_as_absent(ann: ToolContext) -> None:
    await call(ann, "state_put", namespace="n", key="lease", value="mine", ttl_ms=50)
    await call(ann, "state_put", namespace="n", key="kept", value=1)
    assert (await call(ann, "state_get", namespace="n", key="lease"))["expires_at"] is not None
    await asyncio.sleep(0.1)
    assert await call(ann, "state_get", namespace="n", key="lease") is None
    assert [d["key"] for d in (await call(ann, "state_query", namespace="n"))["documents"]] == ["kept"]
    taken = await call(ann, "state_cas", namespace="n", key="lease", expected_version=0, value="yours")
    assert taken == {"matched": True, "version": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"namespace": "a b", "key": "k"}, "namespace may hold only letters"),
        ({"namespace": "n", "key": "x/../y"}, "key may hold only letters"),
        ({"namespace": "n" * 129, "key": "k"}, "namespace is 129 characters; the limit is 128"),
        ({"namespace": "", "key": "k"}, "namespace is required"),
        ({"namespace": "n", "key": "k", "value": "x" * MAX_VALUE_BYTES}, "the limit is 65,536: store less"),
        ({"namespace": "n", "key": "k", "value": float("nan")}, "NaN and Infinity are not JSON"),
        ({"namespace": "n", "key": "k", "value": 1, "metadata": "m" * 5000}, "metadata is 5,002 bytes"),
    ],
)
async def test_bad_arguments_say_what_to_send(ann: ToolContext, args: dict[str, Any], message: str) -> None:
    args.setdefault("value", 1)
    with pytest.raises(ToolError, match=message):
        await call(ann, "state_put", **args)
    assert await call(ann, "state_query", namespace="n") == {
        "namespace": "n",
        "scope": "persona",
        "documents": [],
        "next_cursor": None,
    }


async def test_hostile_nesting_is_refused_quickly(ann: ToolContext) -> None:
    for depth in (100, 100_000):
        value: Any = []
        for _ in range(depth):
            value = [value]
        with pytest.raises(ToolError, match="nested deeper than 64 levels"):
            await call(ann, "state_put", namespace="n", key="k", value=value)
    wide = [[[1]] * 50] * 50  # many brackets, little depth: stored
    assert (await call(ann, "state_put", namespace="n", key="k", value=wide))["version"] == 1


async def test_cas_needs_a_version_it_can_compare(ann: ToolContext) -> None:
    for bad in (None, -1, "1", 1.5, True):
        with pytest.raises(ToolError, match="expected_version is required"):
            await call(ann, "state_cas", namespace="n", key="k", expected_version=bad, value=1)


async def test_a_full_store_refuses_with_what_to_do(
    ann: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writing, "LIMITS", StateLimits(max_documents=2, max_bytes=1000))
    await call(ann, "state_put", namespace="n", key="a", value=1)
    await call(ann, "state_put", namespace="n", key="b", value=1, scope="team")
    await call(ann, "state_put", namespace="n", key="c", value=1, scope="team")
    with pytest.raises(ToolError) as refused:
        await call(ann, "state_cas", namespace="n", key="d", value=1, scope="team", expected_version=0)
    assert "the team's state holds 2 documents; the cap is 2 documents" in str(refused.value)
    assert "state_delete" in str(refused.value)
    assert (await call(ann, "state_put", namespace="n", key="b2", value=1))[
        "version"
    ] == 1  # the persona's own
    with pytest.raises(ToolError, match="this persona's state holds 2 bytes; the cap is 1,000 bytes"):
        await call(ann, "state_put", namespace="n", key="a", value="x" * 1000)


def test_every_tool_is_described_with_its_limits() -> None:
    tools: list[HostTool] = list(TOOLS)
    assert all(t.description and t.input_schema["additionalProperties"] is False for t in tools)
    assert "64 KB" in BY_NAME["state_put"].description
    assert "0: only when it does not exist yet" in BY_NAME["state_cas"].description
