"""The SQLite database: connections, pragmas, migrations and transactions; and
:class:`Database`, the one writer and reader API of every engine (PostgreSQL's connections and
migrations are in :mod:`gateway.store.postgres`).

Three connections, each on a thread of its own (:class:`ConnectionThread`): the writer,
used only under the write lock (so no coroutine ever runs a statement inside another's open
transaction); a reader for plain queries, which sees committed data only (WAL); and one on
which a background task moves WAL pages into the database (checkpoints), so their fsyncs
hold up neither commits nor reads.

The store's functions take a ``sqlite3.Connection`` and run on those threads: writes through
:meth:`Database.run_transaction`, reads through :meth:`Database.read`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from gateway.errors import RefusedError, TransientError
from gateway.metrics import WRITE_CONFLICTS
from gateway.store.connection_thread import ConnectionThread

T = TypeVar("T")
P = ParamSpec("P")

log = logging.getLogger("talon.store")

DB_FILE = "talon.db"

CHECKPOINT_INTERVAL = 0.01  # seconds between checkpoints while writes arrive: many small fsyncs stall commits less than a few large ones
IDLE_CHECK_INTERVAL = 0.5
WAL_REWIND_FRAMES = 8192  # 32 MB of 4 KB pages: past this, finish the checkpoint and rewind
MAX_GROUP = 64  # transactions per group commit: bounds how long the first one waits


class SchemaTooNewError(RefusedError):
    """The database was written by a newer Talon; refusing protects it from damage."""


class WriteConflictError(sqlite3.OperationalError, TransientError):
    """A concurrent transaction of another node made this one impossible to commit as if the
    two had run one after the other (PostgreSQL's serialization failure or a deadlock): the
    whole transaction is run again, never one statement."""


class DatabaseUnreachableError(sqlite3.OperationalError, TransientError):
    """The PostgreSQL server cannot be reached, or closed the connection (it restarted, an
    operator ended it, the network broke). A node whose writer connection is lost stops
    (:mod:`gateway.store.node_watch`); its other loops retry meanwhile and log one line."""


# Times a group meets a conflict before its callers get the error; each retry waits a little
# longer, with jitter, so two nodes that collided do not collide again in step.
WRITE_CONFLICT_RETRIES = 8


def migrations(package: str = "gateway.store.migrations") -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration packaged in ``package``, in order."""
    found = []
    for entry in resources.files(package).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def code_schema_version() -> int:
    return migrations()[-1][0]


def _create_owner_only(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists.

    The database holds every conversation. SQLite creates a new file with the umask's mode
    (usually 0644) and gives ``-wal``, ``-shm`` and ``-journal`` the mode of the main file, so
    creating the main file first covers all of them. An existing file keeps its mode.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


@dataclass(frozen=True, slots=True)
class _Failed:
    """A group member's exception, told apart from a result that happens to be one."""

    error: BaseException


class _MemberRaised(Exception):
    """A member of a group of several raised: the group's transaction is spoiled."""


# A group member: the transaction's function and its key (Database.run_keyed; None: it has none).
Member = tuple[Callable[[sqlite3.Connection], Any], Hashable | None]


def run_in_order(conn: sqlite3.Connection, members: Sequence[Member]) -> list[Any]:
    """Each member's outcome, one member after the other."""
    return [fn(conn) for fn, _ in members]


def _run_group_retrying(engine: Engine, group: list[Member], conn: sqlite3.Connection) -> list[Any]:
    """:func:`_run_group`; when a member raised, or another node's transaction conflicted with
    the group (never on SQLite, whose one writer has no one to conflict with), each member runs
    again in a transaction of its own, so one bad member fails alone and a smaller transaction
    conflicts less often."""
    try:
        return _run_group(engine, group, conn)
    except WriteConflictError:
        WRITE_CONFLICTS.inc()
        conflicted = True
    except _MemberRaised:
        conflicted = False
    return [outcome for member in group for outcome in _run_alone(engine, member, conn, backoff=conflicted)]


def _run_alone(engine: Engine, member: Member, conn: sqlite3.Connection, *, backoff: bool) -> list[Any]:
    for attempt in range(WRITE_CONFLICT_RETRIES):
        if backoff:
            time.sleep(random.uniform(0, 0.002 * 2**attempt))  # on the writer's thread
        try:
            return _run_group(engine, [member], conn)
        except WriteConflictError as exc:
            WRITE_CONFLICTS.inc()
            backoff = True
            if attempt == WRITE_CONFLICT_RETRIES - 1:
                return [_Failed(exc)]
    raise AssertionError("unreachable")


def _run_group(engine: Engine, group: list[Member], conn: sqlite3.Connection) -> list[Any]:
    """One transaction for a group (database thread).

    A conflict with another node's transaction aborts the whole group (it raises
    :class:`WriteConflictError`): its members' work cannot be committed in part. So does a
    member that raises (:class:`_MemberRaised`; a group of one gets its exception as its
    outcome): its partial work is in the transaction, and on PostgreSQL the transaction is
    aborted at its first failed statement. Members are not wrapped in savepoints, which would
    cost two more round trips each on PostgreSQL for a failure that is rare: the caller runs
    a spoiled group's members again, one transaction each.
    """
    conn.execute(engine.begin_write)
    try:
        try:
            outcomes = engine.run_members(conn, group)
        except WriteConflictError:
            raise
        except Exception as exc:
            if len(group) > 1:
                raise _MemberRaised from exc
            conn.rollback()
            return [_Failed(exc)]
        try:
            conn.commit()
        except WriteConflictError:
            raise
        except sqlite3.Error as exc:
            # On PostgreSQL a statement nobody read reports its failure here (pg_pipeline.py).
            if len(group) > 1:
                raise _MemberRaised from exc
            conn.rollback()
            return [_Failed(exc)]
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    return outcomes


def _passive_checkpoint(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(busy, WAL frames, frames checkpointed) after a PASSIVE checkpoint."""
    busy, frames, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return busy, frames, done


def _snapshot(begin: str, fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    """``fn`` inside one read transaction: every statement sees the same committed data."""
    conn.execute(begin)
    try:
        return fn(conn)
    finally:
        conn.rollback()


def _backup(target: Path, conn: sqlite3.Connection) -> None:
    dst = sqlite3.connect(target)
    try:
        conn.backup(dst)
    finally:
        dst.close()


@dataclass(frozen=True, slots=True)
class Engine:
    """What differs between the engines below the store's SQL: how a transaction starts, how
    the schema is brought up to date, and whether :meth:`Database.backup` can copy it."""

    name: str
    begin_write: str
    begin_read: str
    apply_migrations: Callable[[Any], list[str]]
    backup_refusal: str = ""
    # How a group's members run in its transaction (pg_interleave.py on PostgreSQL).
    run_members: Callable[[Any, Sequence[Member]], list[Any]] = run_in_order


class Database:
    """An open Talon database. Use :func:`open_database` to get one.

    One writer API, :meth:`run_transaction`, and one reader API, :meth:`read`: both run a
    plain function of a ``sqlite3.Connection`` (the store's table-group functions) on the
    database's threads in a single hop.
    """

    def __init__(
        self,
        writer: ConnectionThread,
        reader: ConnectionThread,
        checkpoints: ConnectionThread | None,
        path: Path,
        engine: Engine,
        url: str | None = None,
    ):
        self._writer = writer
        self._reader = reader
        self._checkpoints = checkpoints
        self.path = path
        self.engine = engine
        self.url = url  # PostgreSQL's connection URL, for connections of its own (db_query's)
        self._write_lock = asyncio.Lock()
        self._writes = 0  # committed write transactions, so an idle database is left alone
        self._group: list[tuple[Member, asyncio.Future[Any]]] = []
        self._group_committer: asyncio.Task[None] | None = None
        self._checkpointer = (
            asyncio.create_task(self._checkpoint_loop(checkpoints), name="wal-checkpointer")
            if checkpoints is not None
            else None
        )

    async def _checkpoint_loop(self, checkpoints: ConnectionThread) -> None:
        """Move WAL pages into the database while the daemon writes, in small steps.

        The writer has autocheckpoint off: an inline checkpoint's fsync would stall every
        commit queued behind it. PASSIVE checkpoints on their own connection never block
        writers, but under steady writes they never finish either (each commit during one
        adds frames), and SQLite only rewinds a WAL that is fully checkpointed. So once the
        WAL is large, the few frames left are finished under the write lock, and the next
        commit starts the WAL from its beginning instead of growing the file.
        """
        checkpointed_writes = 0
        while True:
            await asyncio.sleep(
                CHECKPOINT_INTERVAL if self._writes != checkpointed_writes else IDLE_CHECK_INTERVAL
            )
            if self._writes == checkpointed_writes:
                continue
            checkpointed_writes = self._writes
            try:
                _, wal_frames, _ = await checkpoints.call(_passive_checkpoint)
                if wal_frames >= WAL_REWIND_FRAMES:
                    async with self._write_lock:
                        await self._writer.call(_passive_checkpoint)
            except sqlite3.Error as exc:
                log.warning("WAL checkpoint failed: %s", exc)

    async def run_transaction(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(conn, *args, **kwargs)`` as a transaction on the writer's thread, in a single hop.

        Group commit: calls that arrive while a commit is running share the next one. A
        group in which one ``fn`` raises is rolled back and each ``fn`` runs again alone, so
        only its caller gets the exception; every caller returns after the commit that holds
        its work. Under load this turns many small commits into a few, and the writer stops
        being the limit. ``fn`` must not block on anything but the database, and it may run
        more than once (its group was spoiled, or conflicted with another node's): it must
        change nothing but the database.
        """
        return await self._join_group(None, fn, *args, **kwargs)

    async def run_keyed(
        self,
        key: Hashable,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`run_transaction` for a transaction that touches only the rows of ``key`` (one
        thread's or chat's) besides new rows and upserted totals: on PostgreSQL it may interleave
        with other keys' in the group (:mod:`gateway.store.pg_interleave`)."""
        return await self._join_group(key, fn, *args, **kwargs)

    async def _join_group(
        self, key: Hashable | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        call = (lambda conn: fn(conn, *args, **kwargs)) if args or kwargs else fn
        self._group.append(((call, key), future))
        if self._group_committer is None or self._group_committer.done():
            self._group_committer = asyncio.create_task(self._commit_groups(), name="db-group-commit")
        return await future

    async def _commit_groups(self) -> None:
        while self._group:
            group = [(member, f) for member, f in self._group[:MAX_GROUP] if not f.cancelled()]
            del self._group[:MAX_GROUP]
            if not group:
                continue
            async with self._write_lock:
                self._writes += 1
                try:
                    outcomes = await self._writer.call(
                        partial(_run_group_retrying, self.engine, [member for member, _ in group])
                    )
                except Exception as exc:  # BEGIN or COMMIT failed: nothing of the group is stored
                    outcomes = [_Failed(exc)] * len(group)
            for (_, future), outcome in zip(group, outcomes, strict=True):
                if future.done():
                    continue
                if isinstance(outcome, _Failed):
                    future.set_exception(outcome.error)
                else:
                    future.set_result(outcome)

    async def on_writer_session(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(conn, *args, **kwargs)`` on the writer's connection between transactions:
        for what belongs to the connection rather than to a transaction (PostgreSQL's advisory
        locks, which last as long as the connection)."""
        async with self._write_lock:
            return await self._writer.call(lambda conn: fn(conn, *args, **kwargs))

    async def read(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``fn(conn, *args, **kwargs)`` on the reader in one hop (one consistent snapshot)."""
        return await self._reader.call(
            partial(_snapshot, self.engine.begin_read, lambda conn: fn(conn, *args, **kwargs))
        )

    async def migrate(self) -> list[str]:
        """Apply pending migrations, each in its own transaction. Returns their names.

        Raises:
            SchemaTooNewError: the database is newer than this code.
        """
        async with self._write_lock:
            return await self._writer.call(self.engine.apply_migrations)

    async def backup(self, target: Path) -> None:
        """A consistent copy, safe while the daemon writes (SQLite online backup).

        Raises:
            RefusedError: the database is PostgreSQL (its own tools back it up).
        """
        if self.engine.backup_refusal:
            raise RefusedError(self.engine.backup_refusal)
        target.parent.mkdir(parents=True, exist_ok=True)
        _create_owner_only(target)
        await self._reader.call(partial(_backup, target))

    async def close(self) -> None:
        if self._group_committer is not None:
            await asyncio.gather(self._group_committer, return_exceptions=True)
        await self._reader.close()
        if self._checkpointer is not None and self._checkpoints is not None:
            self._checkpointer.cancel()
            await asyncio.gather(self._checkpointer, return_exceptions=True)
            await self._checkpoints.close()
            try:
                await self._writer.call(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").close())
            except sqlite3.Error:
                pass  # another process holds the WAL open; the next start checkpoints
        await self._writer.close()


_WRITER_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # WAL + NORMAL: a commit survives a process crash (kill -9); only an OS crash
    # or power loss can roll back the last transactions.
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    "PRAGMA temp_store=MEMORY",
    # Checkpoints (and their fsync) run on a separate connection, off the commit path.
    "PRAGMA wal_autocheckpoint=0",
    # A rewound WAL is cut back to this size; kept above WAL_REWIND_FRAMES so a busy
    # WAL is reused in place rather than cut and grown again.
    "PRAGMA journal_size_limit=67108864",
)
_READER_PRAGMAS = ("PRAGMA query_only=ON", "PRAGMA busy_timeout=5000", "PRAGMA temp_store=MEMORY")
_CHECKPOINTS_PRAGMAS = ("PRAGMA busy_timeout=5000",)


def _pragmas(pragmas: tuple[str, ...], conn: sqlite3.Connection) -> None:
    for pragma in pragmas:
        conn.execute(pragma).close()


async def _connect(path: Path, name: str, pragmas: tuple[str, ...]) -> ConnectionThread:
    worker = await ConnectionThread.open(path, name=name)
    try:
        await worker.call(partial(_pragmas, pragmas))
    except BaseException:
        await worker.close()
        raise
    return worker


async def open_database(path: Path, *, migrate: bool = True) -> Database:
    """Open (creating if needed) and bring the schema up to date.

    Raises :class:`SchemaTooNewError` for a database from a newer Talon.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _create_owner_only(path)
    opened: list[ConnectionThread] = []
    try:
        opened.append(await _connect(path, "talon-db-writer", _WRITER_PRAGMAS))
        await opened[0].call(_apply_migrations if migrate else _check_version)
        opened.append(await _connect(path, "talon-db-reader", _READER_PRAGMAS))
        opened.append(await _connect(path, "talon-db-checkpoints", _CHECKPOINTS_PRAGMAS))
    except BaseException:
        for worker in reversed(opened):
            await worker.close()
        raise
    writer, reader, checkpoints = opened
    return Database(writer, reader, checkpoints, path, SQLITE)


def _schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def _check_version(conn: sqlite3.Connection) -> int:
    current, latest = _schema_version(conn), code_schema_version()
    if current > latest:
        raise SchemaTooNewError(
            f"database schema version {current} is newer than this Talon understands ({latest}); "
            "upgrade Talon, or restore a backup made by this version"
        )
    return current


def _apply_migrations(conn: sqlite3.Connection) -> list[str]:
    """Apply pending migrations, each in its own transaction. Returns their names."""
    current = _check_version(conn)
    applied = []
    for version, name, sql in migrations():
        if version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
        except BaseException:
            conn.rollback()
            raise
        conn.commit()
        log.info("applied migration %s", name)
        applied.append(name)
    return applied


SQLITE = Engine(
    "sqlite", begin_write="BEGIN IMMEDIATE", begin_read="BEGIN", apply_migrations=_apply_migrations
)


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
