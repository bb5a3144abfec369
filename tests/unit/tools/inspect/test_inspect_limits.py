"""The self-inspection tools' handlers: limits, bad arguments with errors the model can act
on, a persona kept to its own runs, and config_get's masking."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.config import load_settings
from gateway.store.db import Database, open_database
from gateway.store.runs import start_run
from gateway.store.traces import TraceEvent, add_events
from tests.unit.scheduler.support import add_thread, make_ctx, make_persona
from tools.base import ToolContext, ToolError
from tools.inspect import TOOLS
from tools.inspect.runs import check_where, matches
from tools.inspect.witness import MATCH_CAP

BY_NAME = {t.mcp_name: t for t in TOOLS}


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


async def _ctx(db: Database, tmp_path: Path, name: str = "ann") -> ToolContext:
    persona = replace(make_persona(tmp_path, name), capabilities=("runtime.inspect",))
    return make_ctx(db, await add_thread(db, f"chat-{name}", name), persona)


async def _traced_run(db: Database, ctx: ToolContext, events: int, name: str = "state_get") -> int:
    run_id = await db.run_transaction(start_run, ctx.thread_id, ctx.persona.name, "local:m", 1.0)
    rows = [
        TraceEvent(
            run_id,
            None,
            ctx.thread_id,
            ctx.persona.name,
            i,
            "tool_call",
            name,
            10.0 + i,
            1.0,
            None,
            json.dumps({"decision": "allowed", "i": i}),
        )
        for i in range(1, events + 1)
    ]
    await db.run_transaction(add_events, rows)
    return run_id


async def call(ctx: ToolContext, tool: str, **args: Any) -> Any:
    result = await BY_NAME[tool].handler(ctx, args)
    json.dumps(result)
    return result


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"payload.__proto__": 1}, "'__proto__' is not allowed"),
        ({"constructor.x": 1}, "'constructor' is not allowed"),
        ({"a.prototype": 1}, "'prototype' is not allowed"),
        ({".".join("a" * 9): 1}, "at most 8 non-empty segments"),
        ({"payload..x": 1}, "non-empty segments"),
        ({f"k{i}": 1 for i in range(11)}, "at most 10 dotted paths"),
        ({"payload.x": {"nested": 1}}, "string, number, boolean or null"),
    ],
)
def test_where_refuses_crafted_paths_and_values_with_what_to_send(
    where: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_where(where)


def test_where_matches_own_keys_exactly_and_never_a_number_for_a_boolean() -> None:
    event = {"kind": "tool_call", "payload": {"ok": True, "n": 1, "inner": {"x": "y"}}}
    assert matches(event, check_where({"kind": "tool_call", "payload.inner.x": "y"}))
    assert not matches(event, check_where({"payload.ok": 1}))
    assert not matches(event, check_where({"payload.n": True}))
    assert not matches(event, check_where({"payload.missing": None}))
    assert not matches(event, check_where({"payload.inner": "y"}))


async def test_another_personas_run_is_answered_like_one_that_does_not_exist(
    db: Database, tmp_path: Path
) -> None:
    ann, bob = await _ctx(db, tmp_path, "ann"), await _ctx(db, tmp_path, "bob")
    bobs = await _traced_run(db, bob, 3)
    with pytest.raises(ToolError, match=f"no run {bobs} among this persona's runs"):
        await call(ann, "read_witness", session=str(bobs))
    with pytest.raises(ToolError, match="no earlier traced run"):
        await call(ann, "get_facet")
    with pytest.raises(ToolError, match="session must be a run id"):
        await call(ann, "get_facet", session="../1")
    found = await call(ann, "search_witness", query="state_get")
    assert found["runs"] == [] and found["sessionsAvailable"] == 0


async def test_read_witness_returns_the_most_recent_matching_events_in_order(
    db: Database, tmp_path: Path
) -> None:
    ann = await _ctx(db, tmp_path)
    run = await _traced_run(db, ann, 60)
    default = await call(ann, "read_witness")
    assert default["total_matching"] == 60 and [e["seq"] for e in default["events"]] == list(range(11, 61))
    few = await call(ann, "read_witness", session=str(run), limit=3, where={"payload.i": 7})
    assert [e["seq"] for e in few["events"]] == [7]


async def test_search_stops_at_the_match_cap_and_says_so(db: Database, tmp_path: Path) -> None:
    ann = await _ctx(db, tmp_path)
    for _ in range(3):
        await _traced_run(db, ann, 90)
    found = await call(ann, "search_witness", query="STATE_get", sessions=2)
    assert found["sessionsAvailable"] == 3 and found["sessionsSearched"] == 2
    assert found["matchCount"] == 180 and found["matchLimitReached"] is False
    capped = await call(ann, "search_witness", query="state_get")
    assert (
        capped["matchCount"] == MATCH_CAP
        and capped["matchLimitReached"] is True
        and "narrow" in capped["hint"]
    )
    with pytest.raises(ToolError, match="since must be an ISO date"):
        await call(ann, "search_witness", query="x", since="yesterday")
    assert (await call(ann, "search_witness", query="state_get", since="2999-01-01"))[
        "sessionsAvailable"
    ] == 0


async def test_get_facet_refuses_an_unknown_field_naming_the_known_ones(db: Database, tmp_path: Path) -> None:
    ann = await _ctx(db, tmp_path)
    await _traced_run(db, ann, 2)
    with pytest.raises(ToolError, match="unknown field 'price'; fields: persona, thread_id"):
        await call(ann, "get_facet", fields=["price"])
    facet = await call(ann, "get_facet", fields=["tool_calls"])
    assert set(facet) == {"run_id", "is_current_run", "tool_calls"} and facet["tool_calls"]["total"] == 2


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TALON_TEST_BOT_TOKEN", "123456:telegram-secret-token")
    monkeypatch.delenv("TALON_TEST_UNSET", raising=False)
    (tmp_path / ".env").write_text("TALON_TEST_FROM_DOTENV=dotenv-secret-value\n")
    (tmp_path / "talon.yaml").write_text(
        "providers:\n"
        "  a: {type: openai, base_url: 'http://user:url-password@127.0.0.1:9/v1', api_key: '${TALON_TEST_FROM_DOTENV}'}\n"
        "  b: {type: openai, base_url: 'http://127.0.0.1:9/v1', api_key: '${TALON_TEST_UNSET:-}'}\n"
        "channels:\n"
        "  - {name: tg, type: telegram, token: '${TALON_TEST_BOT_TOKEN}'}\n"
        "  - {name: sl, type: slack, bot_token: xoxb-literal-secret, app_token: xapp-literal-secret,"
        " signing_secret: literal-signing-secret}\n"
    )
    return tmp_path / "talon.yaml"


async def test_config_get_masks_every_secret_and_env_gives_names_only(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = await _ctx(db, tmp_path)
    ann.settings = load_settings(_config(tmp_path, monkeypatch))
    whole = await call(ann, "config_get", target="config")
    shown = json.dumps(whole)
    for secret in (
        "telegram-secret-token",
        "dotenv-secret-value",
        "url-password",
        "xoxb-literal",
        "xapp-literal",
        "literal-signing-secret",
    ):
        assert secret not in shown
    assert whole["value"]["providers"]["a"]["base_url"] == "http://[masked]@127.0.0.1:9/v1"
    assert whole["value"]["channels"][0]["token"] == "[masked]"
    one = await call(ann, "config_get", target="config", key="channels[1].name")
    assert one["value"] == "sl"
    assert (await call(ann, "config_get", target="config", key="agent.max_turns"))["value"] == 12
    with pytest.raises(ToolError, match="no key 'nope' at agent; keys there: context_tokens, max_tokens"):
        await call(ann, "config_get", target="config", key="agent.nope")
    with pytest.raises(ToolError, match="2 entries; 5 is past the end"):
        await call(ann, "config_get", target="config", key="channels[5]")
    with pytest.raises(ToolError, match="dotted path"):
        await call(ann, "config_get", target="config", key="agent..max_turns")
    env = await call(ann, "config_get", target="env")
    assert env["variables"] == [
        {"name": "TALON_TEST_BOT_TOKEN", "set": True, "from": "environment"},
        {"name": "TALON_TEST_FROM_DOTENV", "set": True, "from": ".env"},
    ]
    assert "secret" not in json.dumps(env).replace("TALON_TEST", "")
    with pytest.raises(ToolError, match="refers to no variable 'HOME'"):
        await call(ann, "config_get", target="env", key="HOME")
