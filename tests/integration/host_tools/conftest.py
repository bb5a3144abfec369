"""A real bridge for tests: the database, loaded personas, the bridge and its socket."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings, load_settings
from gateway.personas import Persona, load_personas
from gateway.store import readonly
from gateway.store.db import DB_FILE, Database, open_database
from tests.harness import write_config
from tests.store_helpers import fetch_rows
from tools.base import HostTool
from tools.bridge import Bridge, RunIdentity
from tools.bridge_client import BridgeClient, BridgeCredentials
from tools.bridge_server import SOCKET_NAME, BridgeServer

# The model is never called in these tests; the provider only has to be valid config.
OFFLINE_PROVIDER = {
    "type": "openai",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "none",
    "max_retries": 0,
}


@dataclass
class BridgeEnv:
    db: Database
    settings: Settings
    personas: dict[str, Persona]
    bridge: Bridge
    server: BridgeServer
    thread_id: int
    _runs: int = 0

    def register(self, persona: str, thread_id: int | None = None) -> RunIdentity:
        self._runs += 1
        return self.bridge.register(1000 + self._runs, thread_id or self.thread_id, persona)

    def client(self, identity: RunIdentity, **claims: Any) -> BridgeClient:
        """A socket client claiming ``identity`` (fields overridden by ``claims``)."""
        fields = {
            "run_id": identity.run_id,
            "thread_id": identity.thread_id,
            "persona": identity.persona,
            "secret": identity.secret,
        }
        fields.update(claims)
        return BridgeClient(BridgeCredentials(self.server.path, **fields), timeout=10)

    async def close(self) -> None:
        await self.server.stop()
        await self.bridge.audit.flush()
        await readonly.close_readonly_connections()
        await self.db.close()

    async def audit(self, run_id: int | None = None) -> list[dict[str, Any]]:
        await self.bridge.audit.flush()
        rows = await fetch_rows(
            self.db,
            "SELECT run_id, thread_id, persona, tool, decision, status, detail FROM audit_log "
            "WHERE ? IS NULL OR run_id = ? ORDER BY id",
            (run_id, run_id),
        )
        return [dict(r) for r in rows]


async def add_thread(
    db: Database, channel: str = "console", chat: str = "main", persona: str | None = None
) -> int:
    now = time.time()

    def write(conn: sqlite3.Connection) -> list[sqlite3.Row]:
        return conn.execute(
            "INSERT INTO threads (channel, chat_id, chat_type, persona, created_at, updated_at) "
            "VALUES (?, ?, 'dm', ?, ?, ?) RETURNING id",
            (channel, chat, persona, now, now),
        ).fetchall()

    rows = await db.run_transaction(write)
    return rows[0][0]


async def make_bridge_env(
    root: Path,
    personas: Mapping[str, dict[str, Any]],
    *,
    tools: Sequence[HostTool] | None = None,
    extra: dict[str, Any] | None = None,
) -> BridgeEnv:
    config = write_config(
        root, provider=OFFLINE_PROVIDER, model="fake:m", personas=dict(personas), extra=extra
    )
    settings = load_settings(config)
    loaded = load_personas(settings)
    settings.data_path.mkdir(parents=True, exist_ok=True)
    db = await open_database(settings.data_path / DB_FILE)
    bridge = Bridge(db=db, settings=settings, personas=loaded, tools=tools)
    server = BridgeServer(settings.data_path / SOCKET_NAME, bridge)
    await server.start()
    return BridgeEnv(db, settings, loaded, bridge, server, await add_thread(db))


@pytest.fixture
async def bridge_env(tmp_path: Path) -> AsyncIterator[BridgeEnv]:
    env = await make_bridge_env(
        tmp_path,
        {
            "assistant": {"capabilities": ["memory.access:thread", "schedule.manage:own"]},
            "other": {"capabilities": ["memory.access:thread"]},
        },
    )
    yield env
    await env.close()
