"""The PostgreSQL database: connections, migrations and transactions.

The same :class:`~gateway.store.db.Database` as SQLite's, over two psycopg connections on
threads of their own (a writer used under the write lock, with group commit, and a reader
whose every call is one repeatable-read snapshot), each a
:class:`~gateway.store.pg_connection.PgConnection`, so the store's functions run unchanged.

Migrations live in ``gateway/store/migrations_pg``: a PostgreSQL database starts at the
baseline (the SQLite migrations up to it in one step); each later SQLite migration has a
PostgreSQL twin of the same number. The schema version is a row of ``talon_schema``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from gateway.errors import RefusedError
from gateway.store.connection_thread import ConnectionThread
from gateway.store.db import DB_FILE, Database, Engine, SchemaTooNewError, code_schema_version, migrations
from gateway.store.nodes import NodeRow, list_nodes
from gateway.store.pg_connection import PgConnection, connect
from gateway.store.pg_interleave import run_interleaved

__all__ = [
    "POSTGRESQL",
    "SINGLE_NODE",
    "NodeLockedError",
    "ServerState",
    "apply_migrations",
    "open_postgres",
    "pg_migrations",
    "server_state",
]

log = logging.getLogger("talon.store")

# Held while migrating, so nodes started together apply each migration once.
_MIGRATION_LOCK = 0x74616C6F6E  # "talon"
# Held by the running daemon for as long as it is connected: the store's claims and leases
# are those of one writer, so a second node on the same database is refused, not let race.
_NODE_LOCK = 0x74616C6F6E01


def pg_migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every packaged PostgreSQL migration, in order."""
    return migrations("gateway.store.migrations_pg")


def _schema_version(conn: PgConnection) -> int:
    exists = conn.execute("SELECT to_regclass('talon_schema') IS NOT NULL").fetchone()
    if not (exists and exists[0]):
        return 0
    row = conn.execute("SELECT max(version) FROM talon_schema").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _check_version(conn: PgConnection) -> int:
    current, latest = _schema_version(conn), code_schema_version()
    if current > latest:
        raise SchemaTooNewError(
            f"database schema version {current} is newer than this Talon understands ({latest}); "
            "upgrade Talon on every node"
        )
    return current


def apply_migrations(conn: PgConnection) -> list[str]:
    """Apply pending migrations, each in its own transaction. Returns their names."""
    conn.execute("SELECT pg_advisory_lock(?)", (_MIGRATION_LOCK,))
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS talon_schema (version BIGINT NOT NULL)")
        current = _check_version(conn)
        applied = []
        for version, name, sql in pg_migrations():
            if version <= current:
                continue
            conn.execute("BEGIN")
            try:
                conn.script(sql)
                conn.execute("DELETE FROM talon_schema")
                conn.execute("INSERT INTO talon_schema (version) VALUES (?)", (version,))
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            log.info("applied migration %s", name)
            applied.append(name)
        return applied
    finally:
        conn.execute("SELECT pg_advisory_unlock(?)", (_MIGRATION_LOCK,))


POSTGRESQL = Engine(
    "postgresql",
    # As if every write ran alone, which is what the store's functions were written for (one
    # writer on SQLite): with several nodes writing, a conflict reruns the transaction.
    begin_write="BEGIN ISOLATION LEVEL SERIALIZABLE",
    # A snapshot, as a read transaction on SQLite's WAL is.
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    apply_migrations=apply_migrations,
    run_members=run_interleaved,
    backup_refusal=(
        "the database is PostgreSQL: back it up with pg_dump (for example "
        '`pg_dump --format=custom --file talon.dump "$TALON_DATABASE_URL"`) and restore '
        "with pg_restore; `talon backup` copies SQLite files only"
    ),
)


# One daemon alone on the database: its one writer connection runs one transaction at a time,
# so its writes already run as if alone, and a snapshot is enough against the rare writer
# beside it (a `talon` command): two writes of one row conflict, and the later transaction
# reruns. Serializable's predicate locks would guard only against that command, and they cost
# the server time on every statement (in one light-load run of bench/bench_e2e.py --postgres
# with pg_stat_statements, 1.8 ms of statement time per reply against 1.3 ms).
SINGLE_NODE = replace(POSTGRESQL, begin_write="BEGIN ISOLATION LEVEL REPEATABLE READ")


def _try_node_lock(conn: PgConnection) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(?)", (_NODE_LOCK,)).fetchone()
    return bool(row and row[0])


def _try_cluster_lock(conn: PgConnection) -> bool:
    # Shared: the nodes of a cluster hold it together, and a single node's exclusive hold
    # keeps them out (and them it).
    row = conn.execute("SELECT pg_try_advisory_lock_shared(?)", (_NODE_LOCK,)).fetchone()
    return bool(row and row[0])


def _prefer_index_scans(conn: PgConnection) -> None:
    # A sequential scan takes a predicate lock on the whole table, so at SERIALIZABLE any
    # other node's write to the table conflicts with it; an index scan locks only the pages it
    # read (PostgreSQL's manual, "Serializable Isolation Level"). The store's tables are small
    # at first, when the planner would scan them whole.
    conn.execute("SET enable_seqscan = off")


async def _hold_node_lock(writer: ConnectionThread, standby_poll: float | None, cluster: bool) -> None:
    """Take the node lock (shared, for a cluster node); as a standby (``standby_poll`` set),
    wait for it."""
    if cluster:
        if await writer.call(_try_cluster_lock):
            await writer.call(_prefer_index_scans)
            return
        raise NodeLockedError(
            "a single-node Talon daemon (database.cluster: false) is running on this database; stop it, "
            "or set database.cluster: true in its talon.yaml too, so that the nodes share the work"
        )
    if await writer.call(_try_node_lock):
        return
    if standby_poll is None:
        raise NodeLockedError(
            "another Talon daemon is running on this database; one active node per database unless "
            "they run as a cluster (docs/scaling.md): stop the other one, give this one its own database, "
            "make it a standby (database.standby: true), or set database.cluster: true on every node"
        )
    log.info("standby: another Talon daemon holds the database; this one takes over when it stops")
    started = time.monotonic()
    while True:
        await asyncio.sleep(standby_poll)
        if await writer.call(_try_node_lock):
            break
    log.info("standby: the database is free after %.1f s; taking over", time.monotonic() - started)


class NodeLockedError(RefusedError):
    """Another daemon holds the database."""


async def open_postgres(
    url: str,
    data_path: Path,
    *,
    migrate: bool = True,
    node: bool = False,
    standby_poll: float | None = None,
    cluster: bool = False,
) -> Database:
    """Connect to ``url`` and bring the schema up to date.

    ``data_path`` is this node's data directory (it must exist): staged files and the outbox
    spool live there, beside where the SQLite file would be. ``node``: this is the daemon, which
    holds the node lock on its writer connection until it closes; with ``standby_poll`` it waits
    for the lock, checking that often, instead of refusing; with ``cluster`` it shares the lock
    with the cluster's other nodes.

    Raises:
        SchemaTooNewError: the database is from a newer Talon.
        NodeLockedError: ``node`` and another daemon holds the database.
        sqlite3.OperationalError: the server cannot be reached or refused the login.
    """
    opened: list[ConnectionThread] = []
    try:
        for role in ("writer", "reader"):
            opened.append(
                await ConnectionThread.start(
                    partial(connect, url, application_name=f"talon-{role}"), name=f"talon-db-{role}"
                )
            )
        if node:
            await _hold_node_lock(opened[0], standby_poll, cluster)
        await opened[0].call(apply_migrations if migrate else _check_version)
    except BaseException:
        for worker in reversed(opened):
            await worker.close()
        raise
    writer, reader = opened
    engine = SINGLE_NODE if node and not cluster else POSTGRESQL
    return Database(writer, reader, None, data_path / DB_FILE, engine, url=url)


@dataclass(frozen=True, slots=True)
class ServerState:
    """What ``talon doctor`` reports of a PostgreSQL store."""

    server_version: str
    schema_version: int  # 0: no Talon tables yet
    node_running: bool  # some daemon holds the node lock


def cluster_nodes(url: str, stale_after: float) -> list[NodeRow]:
    """The cluster's registered nodes (blocking; the caller runs it in a thread).

    Raises:
        sqlite3.OperationalError: the server cannot be reached or refused the login.
    """
    conn = connect(url, application_name="talon-doctor")
    try:
        return list_nodes(conn, time.time(), stale_after)  # type: ignore[arg-type]
    finally:
        conn.close()


def server_state(url: str) -> ServerState:
    """Connect to ``url`` once and read its state (blocking; the caller runs it in a thread).

    Raises:
        sqlite3.OperationalError: the server cannot be reached or refused the login.
    """
    conn = connect(url, application_name="talon-doctor")
    try:
        version = conn.execute("SHOW server_version").fetchone()
        tables = conn.execute("SELECT to_regclass('talon_schema') IS NOT NULL").fetchone()
        schema = (
            conn.execute("SELECT max(version) FROM talon_schema").fetchone() if tables and tables[0] else None
        )
        held = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND ((classid::bigint << 32) | objid::bigint) = ?",
            (_NODE_LOCK,),
        ).fetchone()
    finally:
        conn.close()
    return ServerState(
        server_version=str(version[0]) if version else "?",
        schema_version=int(schema[0]) if schema and schema[0] is not None else 0,
        node_running=bool(held and held[0]),
    )
