"""Shared by the scheduler and tool tests: a controllable clock, threads, personas, contexts."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.config import Settings
from gateway.personas import Persona
from gateway.store.db import Database
from tools.base import ToolContext


class FakeClock:
    """Epoch seconds that only move when a test says so."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def set_local(self, tz: str, *args: int, fold: int = 0) -> float:
        self.now = local(tz, *args, fold=fold)
        return self.now


def local(tz: str, *args: int, fold: int = 0) -> float:
    """Epoch seconds of a wall-clock time in ``tz``."""
    return datetime(*args, tzinfo=ZoneInfo(tz), fold=fold).timestamp()


async def add_thread(db: Database, chat_id: str = "C1", persona: str = "alice") -> int:
    def write(conn: sqlite3.Connection) -> int:
        cursor = conn.execute(
            "INSERT INTO threads (channel, chat_id, persona, created_at, updated_at) VALUES ('console', ?, ?, 0, 0)",
            (chat_id, persona),
        )
        return int(cursor.lastrowid or 0)

    return await db.run_transaction(write)


def make_persona(tmp_path: Path, name: str = "alice", prompts: dict[str, str] | None = None) -> Persona:
    folder = tmp_path / "personas" / name
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    for alias, text in (prompts or {}).items():
        (folder / "prompts" / f"{alias}.md").write_text(text, encoding="utf-8")
    return Persona(
        name=name,
        provider="local",
        model="test-model",
        description=None,
        capabilities=("schedule.manage:own", "memory.access:thread"),
        system_prompt="# Test persona",
        path=folder,
    )


def make_ctx(db: Database, thread_id: int, persona: Persona, timezone: str = "UTC") -> ToolContext:
    return ToolContext(thread_id=thread_id, persona=persona, db=db, settings=Settings(timezone=timezone))
