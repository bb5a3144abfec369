"""Shared by the sub-agent tests: a runner wired to stand-in model servers, personas, threads."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.backoff import Backoff
from gateway.config import ProviderSettings, Settings
from gateway.personas import Persona
from gateway.runtime.providers import LazyProvider, build_provider
from gateway.store.db import Database
from gateway.subagents import SubagentRunner, load_definitions
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI, Reply
from tests.store_helpers import fetch_rows
from tools.base import ToolContext

BUILTINS = ("session-summarizer", "memory-retriever", "memory-groomer", "file-searcher", "spark-coder")


def json_reply(data: Any, **kw: Any) -> Reply:
    return Reply(text=json.dumps(data), **kw)


def provider_settings(fake: FakeAnthropic | FakeOpenAI) -> ProviderSettings:
    kind = "anthropic" if isinstance(fake, FakeAnthropic) else "openai"
    return ProviderSettings(type=kind, base_url=fake.base_url, api_key="test-key", max_retries=0, timeout=10)


@dataclass
class Services:
    """What ``subagent_invoke`` finds in ``ctx.services``."""

    subagents: SubagentRunner


@dataclass
class Env:
    root: Path
    settings: Settings
    runner: SubagentRunner
    providers: dict[str, LazyProvider] = field(default_factory=dict)

    def ctx(self, db: Database, thread_id: int, persona: Persona) -> ToolContext:
        return ToolContext(
            thread_id=thread_id,
            persona=persona,
            db=db,
            settings=self.settings,
            services=Services(self.runner),
        )

    async def aclose(self) -> None:
        for provider in self.providers.values():
            await provider.aclose()


def make_env(
    root: Path,
    fakes: Mapping[str, FakeAnthropic | FakeOpenAI],
    *,
    models: Mapping[str, str | Sequence[str]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Env:
    """A runner whose providers (by name) point at ``fakes``; definitions from ``root/subagents``."""
    settings = Settings(
        config_dir=root, data_dir=Path("data"), providers={n: provider_settings(f) for n, f in fakes.items()}
    )
    providers = {
        n: build_provider(n, p, backoff=Backoff(base=0.01, max=30.0)) for n, p in settings.providers.items()
    }
    runner = SubagentRunner(
        load_definitions(root),
        providers,
        settings=settings,
        models=models,
        environ=environ if environ is not None else {"OPENAI_API_KEY": "sk-test"},
    )
    return Env(root, settings, runner, providers)


def make_persona(
    root: Path,
    name: str = "alice",
    *,
    subagents: Sequence[str] = BUILTINS,
    capabilities: Sequence[str] = ("subagent.invoke", "memory.access:thread"),
) -> Persona:
    return Persona(
        name=name,
        provider="anthropic",
        model="persona-model",
        description=None,
        capabilities=tuple(capabilities),
        system_prompt=f"# {name}",
        path=root / "personas" / name,
        subagents=tuple(subagents),
    )


def write_definition(root: Path, file: str, front: str, body: str = "Do the task.") -> Path:
    folder = root / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(f"---\n{textwrap.dedent(front).strip()}\n---\n{body}\n", encoding="utf-8")
    return path


async def add_thread(db: Database, chat_id: str = "C1", persona: str = "alice") -> int:
    def write(conn: sqlite3.Connection) -> int:
        cursor = conn.execute(
            "INSERT INTO threads (channel, chat_id, persona, created_at, updated_at) VALUES ('console', ?, ?, 0, 0)",
            (chat_id, persona),
        )
        return int(cursor.lastrowid or 0)

    return await db.run_transaction(write)


async def add_memory(db: Database, thread_id: int, items: Mapping[str, str], kind: str = "note") -> None:
    now = time.time()

    def write(conn: sqlite3.Connection) -> None:
        for i, (key, value) in enumerate(items.items()):
            conn.execute(
                "INSERT INTO memory_items (thread_id, persona, key, type, value, created_at, updated_at) "
                "VALUES (?, 'alice', ?, ?, ?, ?, ?)",
                (thread_id, key, kind, value, now + i, now + i),
            )

    await db.run_transaction(write)


async def memory(db: Database, thread_id: int) -> dict[str, str]:
    rows = await fetch_rows(
        db, "SELECT key, value FROM memory_items WHERE thread_id = ? ORDER BY key", (thread_id,)
    )
    return {r["key"]: r["value"] for r in rows}


def request_text(body: dict[str, Any]) -> str:
    """Everything a model request carried (system prompt and messages) as one string."""
    return json.dumps(body, ensure_ascii=False)
