"""The SQLite database: connection, pragmas, migrations and transactions.

One writer connection serves the whole daemon; :meth:`Database.transaction` serializes
writers so that each pipeline/queue/outbox step is one atomic commit.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")

log = logging.getLogger("talon.store")

DB_FILE = "talon.db"


class SchemaTooNewError(Exception):
    """The database was written by a newer Talon; refusing protects it from damage."""


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every packaged migration, in order."""
    found = []
    for entry in resources.files("gateway.store.migrations").iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def code_schema_version() -> int:
    return migrations()[-1][0]


class Database:
    """An open Talon database. Use :func:`open_database` to get one."""

    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._write_lock = asyncio.Lock()
        self._checkpointer: asyncio.Task[None] | None = None

    def start_checkpointer(self, interval: float = 1.0) -> None:
        """Move WAL pages into the database in the background (PASSIVE: never blocks writers).

        The writer connection has autocheckpoint off: an inline checkpoint's fsync would
        stall every commit queued behind it.
        """

        async def loop() -> None:
            async with aiosqlite.connect(self.path) as conn:
                while True:
                    await asyncio.sleep(interval)
                    try:
                        await conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    except sqlite3.Error as exc:
                        log.warning("WAL checkpoint failed: %s", exc)

        self._checkpointer = asyncio.create_task(loop(), name="wal-checkpointer")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
        async with self._write_lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self.conn.rollback()
                raise
            await self.conn.commit()

    async def run_transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` as one transaction on the database thread, in a single hop.

        For hot paths (intake): one round trip instead of one per statement. ``fn`` must
        not block on anything but SQLite. It uses aiosqlite's internal ``_execute``
        (the primitive every public aiosqlite method is built on); the store tests pin it.
        """

        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            return result

        async with self._write_lock:
            return await self.conn._execute(transaction, self.conn._conn)

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        return list(await self.conn.execute_fetchall(sql, tuple(params)))

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        rows = await self.conn.execute_fetchall(sql, tuple(params))
        return rows[0] if rows else None

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> None:
        """One statement in its own transaction."""
        async with self.transaction() as conn:
            await conn.execute(sql, tuple(params))

    async def backup(self, target: Path) -> None:
        """A consistent copy, safe while the daemon writes (SQLite online backup)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        async with aiosqlite.connect(target) as dst:
            await self.conn.backup(dst)

    async def close(self) -> None:
        if self._checkpointer:
            self._checkpointer.cancel()
            await asyncio.gather(self._checkpointer, return_exceptions=True)
        try:
            await self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # another reader holds the WAL; the next start checkpoints
        await self.conn.close()


async def open_database(path: Path, *, migrate: bool = True) -> Database:
    """Open (creating if needed) and bring the schema up to date.

    Raises :class:`SchemaTooNewError` for a database from a newer Talon.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = await aiosqlite.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        for pragma in (
            "PRAGMA journal_mode=WAL",
            # WAL + NORMAL: a commit survives a process crash (kill -9); only an OS crash
            # or power loss can roll back the last transactions.
            "PRAGMA synchronous=NORMAL",
            "PRAGMA foreign_keys=ON",
            "PRAGMA busy_timeout=5000",
            "PRAGMA temp_store=MEMORY",
            # Checkpoints (and their fsync) run on a separate connection, off the commit path.
            "PRAGMA wal_autocheckpoint=0",
        ):
            await conn.execute(pragma)
        if migrate:
            await apply_migrations(conn)
        else:
            await check_version(conn)
    except BaseException:
        await conn.close()
        raise
    return Database(conn, path)


async def schema_version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("PRAGMA user_version") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def check_version(conn: aiosqlite.Connection) -> int:
    current, latest = await schema_version(conn), code_schema_version()
    if current > latest:
        raise SchemaTooNewError(
            f"database schema version {current} is newer than this Talon understands ({latest}); "
            "upgrade Talon, or restore a backup made by this version"
        )
    return current


async def apply_migrations(conn: aiosqlite.Connection) -> list[str]:
    """Apply pending migrations, each in its own transaction. Returns their names."""
    current = await check_version(conn)
    applied = []
    for version, name, sql in migrations():
        if version <= current:
            continue
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(sql):
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version={version}")
        except BaseException:
            await conn.rollback()
            raise
        await conn.commit()
        log.info("applied migration %s", name)
        applied.append(name)
    return applied


def _statements(script: str) -> list[str]:
    """Split a migration script into complete statements (executescript would COMMIT)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        if not buf and line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
