"""Shared findings: visible within one root run and its children, invisible from another root
run; a child's subscription delivers what a sibling publishes with its next tool result; new
children's prompts carry the tree's findings; a persona without the labels is offered none of
these tools (nor skill, procedure_write, model_complete) and the bridge refuses direct calls."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from connectors.base import ThreadKey
from gateway.config import load_settings
from gateway.findings import findings_prompt
from gateway.personas import load_personas
from gateway.store.db import Database, open_database
from gateway.store.runs import start_run
from gateway.store.threads import upsert_thread
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tools import findings as findings_family
from tools.bridge import Bridge
from tools.findings import publish

OFFLINE = {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "none"}
ALL_LABELS = ["workspace.share", "skill.use", "model.complete", "memory.access:thread"]


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[Bridge, Database, int]]:
    config = write_config(
        tmp_path,
        provider=OFFLINE,
        personas={"assistant": {"capabilities": ["workspace.share"]}, "plain": {"capabilities": []}},
    )
    settings = load_settings(config)
    db = await open_database(tmp_path / "data" / "talon.db")
    row = await db.run_transaction(
        upsert_thread, ThreadKey("console", "main"), chat_type="dm", persona="assistant", now=1.0
    )
    try:
        yield Bridge(db=db, settings=settings, personas=load_personas(settings)), db, row.id
    finally:
        await db.close()


async def _run(db: Database, thread_id: int) -> int:
    return await db.run_transaction(start_run, thread_id, "assistant", "m", time.time())


def _json(text: str) -> Any:
    return json.loads(text)


async def test_a_tree_shares_its_findings_and_another_root_run_sees_none(
    world: tuple[Bridge, Database, int],
) -> None:
    bridge, db, thread = world
    root = bridge.register(await _run(db, thread), thread, "assistant")
    other = bridge.register(await _run(db, thread), thread, "assistant")
    child = bridge.register(await _run(db, thread), thread, "assistant", depth=1, root_run_id=root.run_id)
    sibling = bridge.register(await _run(db, thread), thread, "assistant", depth=1, root_run_id=root.run_id)

    published = await bridge.call(
        root,
        "workspace_publish",
        {
            "type": "finding",
            "subject": "Auth refresh",
            "content": "tokens expire after 5 min",
            "evidence": ["a.py:3"],
        },
    )
    entry_id = _json(published.content)["id"]
    seen_by_child = _json((await bridge.call(child, "workspace_query", {"query": "EXPIRE"})).content)
    seen_by_other = _json((await bridge.call(other, "workspace_query", {"query": "expire"})).content)
    subscribed = await bridge.call(child, "workspace_subscribe", {"subject": "auth"})
    await bridge.call(
        sibling, "workspace_publish", {"type": "status", "subject": "deploy", "content": "unrelated"}
    )
    await bridge.call(
        sibling,
        "workspace_publish",
        {
            "type": "evidence",
            "subject": "auth refresh",
            "content": "seen in the logs",
            "relates_to": [entry_id],
            "relation_type": "supports",
        },
    )
    next_result = await bridge.call(child, "workspace_query", {"query": "nothing-matches-this"})
    after = await bridge.call(child, "workspace_query", {"query": "nothing-matches-this"})
    foreign = await bridge.call(
        other, "workspace_publish", {"type": "finding", "content": "x", "relates_to": [entry_id]}
    )
    prompt = await findings_prompt(db, root.run_id)

    assert [e["content"] for e in seen_by_child["entries"]] == ["tokens expire after 5 min"]
    assert seen_by_child["entries"][0]["evidence"] == ["a.py:3"]
    assert seen_by_other == {"entries": []}
    assert not subscribed.is_error
    head, _, delivery = next_result.content.partition("\n\n<workspace-delivery")
    assert _json(head) == {"entries": []}
    assert "seen in the logs" in delivery and "unrelated" not in delivery
    assert '"relation_type": "supports"' in delivery
    assert "<workspace-delivery" not in after.content  # each entry is delivered once
    assert foreign.is_error and "relates_to names entries this run does not have" in foreign.content
    assert prompt is not None and "tokens expire after 5 min" in prompt and "<workspace-entries>" in prompt
    assert await findings_prompt(db, other.run_id) is None


async def test_subscribe_is_for_children_and_a_tree_holds_a_bounded_number_of_entries(
    world: tuple[Bridge, Database, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    bridge, db, thread = world
    root = bridge.register(await _run(db, thread), thread, "assistant")
    child = bridge.register(await _run(db, thread), thread, "assistant", depth=1, root_run_id=root.run_id)
    monkeypatch.setattr(publish, "MAX_ENTRIES", 2)
    results = [
        await bridge.call(root, "workspace_publish", {"type": "status", "content": f"step {i}"})
        for i in range(3)
    ]
    refused = await bridge.call(root, "workspace_subscribe", {})
    bad = await bridge.call(root, "workspace_publish", {"type": "rumour", "content": "x"})
    big = await bridge.call(root, "workspace_publish", {"type": "status", "content": "x" * (16 * 1024 + 1)})
    assert [r.is_error for r in results] == [False, False, True]
    assert "already shared 2 workspace entries" in results[2].content
    assert "workspace_subscribe" not in {t.mcp_name for t in bridge.tools_for(root)}
    assert "workspace_subscribe" in {t.mcp_name for t in bridge.tools_for(child)}
    assert refused.is_error and refused.refused and "child agents only" in refused.content
    assert bad.is_error and "type" in bad.content and "finding" in bad.content
    assert big.is_error and "content" in big.content


async def test_without_the_labels_the_tools_are_not_offered_and_a_direct_call_is_refused(
    world: tuple[Bridge, Database, int],
) -> None:
    bridge, db, thread = world
    plain = bridge.register(await _run(db, thread), thread, "plain")
    mine = {t.mcp_name for t in [*findings_family.TOOLS]} | {"skill", "procedure_write", "model_complete"}
    offered = {t.mcp_name for t in bridge.tools_for(plain)}
    calls = {
        "workspace_publish": {"type": "finding", "content": "x"},
        "workspace_query": {"query": "x"},
        "skill": {"name": "meeting-notes"},
        "procedure_write": {"name": "a", "content": "b"},
        "model_complete": {"prompt": "x"},
    }
    refusals = {name: await bridge.call(plain, name, args) for name, args in calls.items()}
    assert not (mine & offered)
    for name, result in refusals.items():
        assert result.is_error and result.refused, name
    assert "'skill.use'" in refusals["skill"].content
    assert "'model.complete'" in refusals["model_complete"].content
    assert "'workspace.share'" in refusals["workspace_publish"].content


async def test_in_turns_a_finding_is_seen_by_its_own_run_and_not_by_another_conversations_run(
    tmp_path: Path,
) -> None:
    turns = [
        [
            Call("workspace_publish", {"type": "decision", "subject": "db", "content": "use postgres"}),
            Call("workspace_query", {"query": "postgres"}),
        ],
        [Call("workspace_query", {"query": "postgres"})],
    ]

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(turns[0]):
            return Reply(tool_calls=[turns[0][len(results)]])
        return Reply(text=" | ".join(text for _, text in results))

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": ALL_LABELS}}
        )
        async with running_gateway(config) as gw:
            first = await say(gw, "decide")
            turns.pop(0)
            second = await say(gw, "what was decided?", thread="other")
        offered = {t["name"] for t in fake.requests[0]["tools"]}
    assert "use postgres" in first.text.split(" | ")[1]
    assert json.loads(second.text) == {"entries": []}
    assert {"workspace_publish", "workspace_query", "skill", "model_complete", "procedure_write"} <= offered
    assert "workspace_subscribe" not in offered  # a turn is a root run, not a child
