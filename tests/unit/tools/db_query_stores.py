"""The store db_query's tests run against, on each engine: SQLite, and PostgreSQL on the
throwaway server of :mod:`tests.pg_server` (skipped with the reason when it is not installed).

A module seeds one store per engine once; each test gets a copy of its own (a copied file, or
a database made from the seeded one as its template), so a test that writes changes nothing
for the next. Copying a PostgreSQL database takes about half a second, so a test marked
``shared_store`` (one that only reads) shares one copy with the module's other such tests.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from gateway.store import readonly, readonly_pg
from gateway.store.db import Database, open_database
from gateway.store.postgres import open_postgres
from tests.pg_server import PgServer

ENGINES = ("sqlite", "postgresql")

Seed = Callable[[Database], Awaitable[None]]


class SeededStores:
    """One seeded store per engine, made on first use; :meth:`copy` gives a test its own."""

    def __init__(self, seed: Seed, root: Path) -> None:
        self.seed = seed
        self.root = root
        self._file: Path | None = None
        self._template: str | None = None
        self._shared: tuple[PgServer, str] | None = None  # the readers' copy

    async def _seeded_file(self) -> Path:
        if self._file is None:
            path = self.root / "seed" / "talon.db"
            database = await open_database(path)
            try:
                await self.seed(database)
            finally:
                await database.close()
            self._file = path
        return self._file

    async def _seeded_template(self, server: PgServer) -> str:
        if self._template is None:
            url = await asyncio.to_thread(server.new_database)
            data = self.root / "pg-seed"
            data.mkdir(exist_ok=True)
            database = await open_postgres(url, data)
            try:
                await self.seed(database)
            finally:
                await database.close()
            name = url.rsplit("/", 1)[1]
            await asyncio.to_thread(server.make_template, name)
            self._template = name
        return self._template

    async def copy(
        self, request: pytest.FixtureRequest, engine: str, tmp_path: Path
    ) -> AsyncIterator[Database]:
        """A copy of the seeded store on ``engine``, open for the test; closed (and dropped) after."""
        server: PgServer | None = None
        if engine == "sqlite":
            copy = tmp_path / "talon.db"
            shutil.copyfile(await self._seeded_file(), copy)
            database = await open_database(copy)
        elif request.node.get_closest_marker("shared_store") is not None:
            if self._shared is None:
                shared_server: PgServer = request.getfixturevalue("pg_server")
                template = await self._seeded_template(shared_server)
                self._shared = shared_server, await asyncio.to_thread(shared_server.new_database, template)
            database = await open_postgres(self._shared[1], tmp_path)
        else:
            server = request.getfixturevalue("pg_server")
            url = await asyncio.to_thread(server.new_database, await self._seeded_template(server))
            database = await open_postgres(url, tmp_path)
        try:
            yield database
        finally:
            await close_query_connections()
            await database.close()
            if server is not None and database.url:
                await asyncio.to_thread(server.drop_database, database.url)

    def drop(self) -> None:
        """Drop the readers' shared copy (at the end of the module)."""
        if self._shared is not None:
            server, url = self._shared
            server.drop_database(url)
            self._shared = None


async def close_query_connections() -> None:
    """Close db_query's read-only connections on both engines."""
    await readonly.close_readonly_connections()
    await readonly_pg.close_pg_readonly_connections()
