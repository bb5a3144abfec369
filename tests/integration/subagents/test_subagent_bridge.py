"""subagent_invoke through the host-tool bridge, with personas and sub-agents loaded from a config dir."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, Settings, load_settings
from gateway.personas import Persona, load_personas
from gateway.runtime.providers import LazyProvider, build_provider
from gateway.store.db import DB_FILE, Database, open_database
from gateway.subagents import SubagentRunner
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.harness import provider_for, write_config
from tests.store_helpers import fetch_rows
from tools.bridge import Bridge
from tools.host import memory_access, subagent_invoke

PERSONAS = {
    "researcher": {
        "capabilities": ["subagent.invoke", "memory.access:thread"],
        "subagents": ["translator", "memory-retriever"],
    },
    "no-label": {"capabilities": ["memory.access:thread"], "subagents": ["translator"]},
    "unlisted": {"capabilities": ["subagent.invoke"], "subagents": []},
}
TRANSLATOR = """\
---
name: translator
description: Translate text to French.
model: anthropic:claude-haiku-4-5
max_tokens: 256
timeout: 10
---
Translate the input's text to French. Reply with the translation only.
"""


@dataclass
class Services:
    subagents: SubagentRunner


@dataclass
class Setup:
    settings: Settings
    personas: dict[str, Persona]
    db: Database
    bridge: Bridge
    thread_id: int
    runs: int = 0

    async def call(self, persona: str, args: dict[str, Any]) -> tuple[str, bool]:
        self.runs += 1
        identity = self.bridge.register(self.runs, self.thread_id, persona)
        result = await self.bridge.call(identity, "subagent_invoke", args)
        return result.content, result.is_error

    async def audit(self) -> list[tuple[str, str | None]]:
        await self.bridge.audit.flush()  # audit rows are written in batches
        rows = await fetch_rows(self.db, "SELECT decision, status FROM audit_log ORDER BY id")
        return [(r["decision"], r["status"]) for r in rows]


def config(root: Path, fake: FakeAnthropic, personas: dict[str, dict[str, Any]] = PERSONAS) -> Settings:
    path = write_config(
        root,
        provider=provider_for(fake),
        model="anthropic:persona-model",
        personas=personas,
        extra={"providers": {"anthropic": provider_for(fake)}, "bindings": []},
    )
    (root / "subagents").mkdir(exist_ok=True)
    (root / "subagents" / "translator.md").write_text(TRANSLATOR, encoding="utf-8")
    return load_settings(path)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def setup(tmp_path: Path, fake: FakeAnthropic) -> AsyncIterator[Setup]:
    settings = config(tmp_path, fake)
    personas = load_personas(settings)
    providers: dict[str, LazyProvider] = {n: build_provider(n, p) for n, p in settings.providers.items()}
    runner = SubagentRunner.from_settings(settings, providers, personas=personas)
    settings.data_path.mkdir(parents=True, exist_ok=True)
    db = await open_database(settings.data_path / DB_FILE)

    def write(conn: sqlite3.Connection) -> int:
        return int(
            conn.execute(
                "INSERT INTO threads (channel, chat_id, persona, created_at, updated_at) VALUES ('console', 'main', 'researcher', 0, 0)"
            ).lastrowid
            or 0
        )

    thread_id = await db.run_transaction(write)
    bridge = Bridge(
        db=db,
        settings=settings,
        personas=personas,
        services=Services(runner),  # type: ignore[arg-type]
        tools=[memory_access.TOOL, subagent_invoke.TOOL],
    )
    yield Setup(settings, personas, db, bridge, thread_id)
    await db.close()
    for provider in providers.values():
        await provider.aclose()


async def test_a_user_defined_sub_agent_runs_through_the_bridge(setup: Setup, fake: FakeAnthropic) -> None:
    fake.script(Reply(text="Bonjour tout le monde", input_tokens=12, output_tokens=5))
    content, is_error = await setup.call(
        "researcher", {"name": "translator", "input": {"text": "Hello world"}}
    )
    assert not is_error, content
    result = json.loads(content)
    assert result == {
        "summary": "Bonjour tout le monde",
        "data": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 5,
            "model_calls": 1,
            "model": "anthropic:claude-haiku-4-5",
        },
    }
    assert fake.requests[0]["system"].startswith("Translate the input's text to French.")
    assert await setup.audit() == [("allowed", None), ("result", "ok")]


async def test_without_the_label_the_tool_is_not_offered(setup: Setup, fake: FakeAnthropic) -> None:
    content, is_error = await setup.call("no-label", {"name": "translator", "input": {"text": "hi"}})
    assert is_error and "needs the capability 'subagent.invoke'" in content
    assert fake.requests == []
    assert await setup.audit() == [("refused", None)]


async def test_a_sub_agent_the_persona_does_not_list_is_refused(setup: Setup, fake: FakeAnthropic) -> None:
    content, is_error = await setup.call("unlisted", {"name": "translator", "input": {"text": "hi"}})
    assert is_error
    assert content == (
        "persona 'unlisted' may not invoke the sub-agent 'translator': it is not listed under subagents: "
        "in personas/unlisted/persona.yaml (listed: none)"
    )
    assert fake.requests == []
    assert await setup.audit() == [("allowed", None), ("result", "error")]


async def test_a_persona_listing_an_unknown_sub_agent_stops_the_start(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    settings = config(tmp_path, fake, {"researcher": {"subagents": ["translater"]}})
    with pytest.raises(ConfigError) as caught:
        SubagentRunner.from_settings(settings, {}, personas=load_personas(settings))
    assert caught.value.problems == [
        "personas/researcher/persona.yaml: subagents[0]: no sub-agent named 'translater'; known: "
        "file-searcher, memory-groomer, memory-retriever, session-summarizer, spark-coder, translator"
    ]


async def test_a_broken_user_definition_stops_the_start(tmp_path: Path, fake: FakeAnthropic) -> None:
    settings = config(tmp_path, fake, {"researcher": {}})
    (tmp_path / "subagents" / "translator.md").write_text(
        textwrap.dedent(TRANSLATOR).replace("max_tokens: 256", "max_tokens: lots"), encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        SubagentRunner.from_settings(settings, {})
    [problem] = caught.value.problems
    assert problem.startswith(f"{tmp_path / 'subagents'}/translator.md: max_tokens: ")
