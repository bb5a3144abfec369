"""The store's contract: what every backend's table-group functions do, whatever the database.

A test reaches the store only through its :class:`Backend`: the writer (:meth:`Backend.write`),
the reader (:meth:`Backend.read`) and the table-group modules. It runs no SQL of its own and
looks at no database file, so every test runs on both backends: SQLite, and PostgreSQL on a
throwaway server (:mod:`tests.pg_server`; skipped with the reason when it is not installed).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Concatenate, ParamSpec, TypeVar

import pytest

from gateway.store import (
    audit,
    children,
    delegation,
    facts,
    findings,
    memory,
    messages,
    outbox,
    previews,
    procedures,
    queue,
    runs,
    schedules,
    state,
    threads,
    traces,
    usage,
)
from gateway.store.db import Database, open_database
from gateway.store.postgres import open_postgres
from tests.pg_server import PgServer

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backend:
    """One open store and the modules that implement its table groups."""

    name: str
    db: Database
    threads: ModuleType
    messages: ModuleType
    runs: ModuleType
    queue: ModuleType
    outbox: ModuleType
    memory: ModuleType
    delegation: ModuleType
    audit: ModuleType
    schedules: ModuleType
    state: ModuleType
    facts: ModuleType
    traces: ModuleType
    children: ModuleType = children
    findings: ModuleType = findings
    procedures: ModuleType = procedures
    usage: ModuleType = usage
    previews: ModuleType = previews

    async def write(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn`` in a transaction of the one writer API."""
        return await self.db.run_transaction(fn, *args, **kwargs)

    async def write_keyed(
        self,
        key: Hashable,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn`` in a transaction that touches the rows of ``key`` only (Database.run_keyed)."""
        return await self.db.run_keyed(key, fn, *args, **kwargs)

    async def read(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn`` on a snapshot of the one reader API."""
        return await self.db.read(fn, *args, **kwargs)


def _backend(name: str, db: Database) -> Backend:
    return Backend(
        name,
        db,
        threads,
        messages,
        runs,
        queue,
        outbox,
        memory,
        delegation,
        audit,
        schedules,
        state,
        facts,
        traces,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    server: PgServer | None = None
    if request.param == "sqlite":
        db = await open_database(tmp_path / "talon.db")
    else:
        server = request.getfixturevalue("pg_server")
        url = await asyncio.to_thread(server.migrated_database)
        db = await open_postgres(url, tmp_path)
    try:
        yield _backend(request.param, db)
    finally:
        await db.close()
        if server is not None:  # its cluster may be in memory (tests.pg_server): give the room back
            await asyncio.to_thread(server.drop_database, url)
