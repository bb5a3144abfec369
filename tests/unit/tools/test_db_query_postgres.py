"""db_query on PostgreSQL: what the database itself enforces (the role, the read-only
transaction), what an operator is told when Talon may not set the role up, and what
``talon doctor`` says. The tests both engines share are in test_db_query.py and
test_db_query_limits.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from itertools import count
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.config import Settings
from gateway.database_doctor import database_findings
from gateway.personas import Persona
from gateway.store import readonly, readonly_pg
from gateway.store.db import Database
from gateway.store.postgres import open_postgres
from gateway.store.query_role import role_name
from tests.pg_server import PgServer
from tests.store_helpers import execute_sql, fetch_row
from tests.unit.tools.db_query_stores import close_query_connections
from tools.base import ToolContext, ToolError
from tools.host import db_query
from tools.host.sql_rules import ALLOWED_TABLES

_users = count(1)


def _persona(tmp_path: Path) -> Persona:
    return Persona(
        name="assistant",
        provider="local",
        model="m",
        description=None,
        capabilities=("db.query:own",),
        system_prompt="# Assistant",
        path=tmp_path,
    )


async def _seed(db: Database) -> None:
    now = time.time()
    await execute_sql(
        db,
        "INSERT INTO threads (id, channel, chat_id, persona, created_at, updated_at) "
        "VALUES (1, 'console', 'c', 'assistant', ?, ?)",
        (now, now),
    )
    await execute_sql(
        db, "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', 'hello', ?)", (now,)
    )


def _admin(server: PgServer, url: str, *statements: str) -> None:
    """Run ``statements`` as the server's superuser in the database at ``url``."""
    with psycopg.connect(server.url(url.rsplit("/", 1)[1]), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
async def store(pg_server: PgServer, tmp_path: Path) -> AsyncIterator[Database]:
    url = await asyncio.to_thread(pg_server.new_database)
    db = await open_postgres(url, tmp_path)
    await _seed(db)
    try:
        yield db
    finally:
        await close_query_connections()
        await db.close()
        await asyncio.to_thread(pg_server.drop_database, url)


def _pool(db: Database) -> readonly_pg.PgReadOnlyPool:
    assert db.url
    return readonly_pg.pg_readonly_pool(db.url, db_query.ACCESS)


async def _query(db: Database, sql: str) -> list[list[Any]]:
    return (await _pool(db).query(sql, {}, 10, 1.0)).rows


async def test_a_query_runs_as_the_databases_own_role_in_a_read_only_transaction_that_is_rolled_back(
    store: Database,
) -> None:
    assert store.url
    role = role_name(store.url.rsplit("/", 1)[1])
    [[user, read_only, timeout]] = await _query(
        store,
        "SELECT current_user, current_setting('transaction_read_only'), current_setting('statement_timeout')",
    )
    assert (user, read_only) == (role, "on")
    # What is left of the query's 1 s when its rows are read.
    assert timeout == "1s" or (timeout.endswith("ms") and 500 < int(timeout[:-2]) < 1000), timeout
    with pytest.raises(readonly.ReadOnlyQueryError, match="read-write mode must be set before any query"):
        await _query(store, "SELECT set_config('transaction_read_only', 'off', true)")
    # What a function may still create in a read-only transaction is rolled back with it.
    [[made]] = await _query(store, "SELECT lo_from_bytea(0, 'x')")
    row = await fetch_row(store, "SELECT count(*) FROM pg_largeobject_metadata WHERE oid = ?", (made,))
    assert row is not None and row[0] == 0
    # The role may read exactly the four tables of the store's schema.
    readable = await store.read(
        lambda conn: conn.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p') "
            "AND has_any_column_privilege(?, c.oid, 'SELECT') ORDER BY 1",
            (role,),
        ).fetchall()
    )
    assert {r[0] for r in readable} == ALLOWED_TABLES == readonly.QUERY_TABLES


async def test_nodes_setting_the_role_up_at_once_both_answer(store: Database) -> None:
    assert store.url
    loop = asyncio.get_running_loop()
    nodes = [readonly_pg.PgReadOnlyPool(store.url, db_query.ACCESS, loop) for _ in range(3)]
    try:
        results = await asyncio.gather(*(n.query("SELECT count(*) FROM threads", {}, 5, 2.0) for n in nodes))
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
    assert [r.rows for r in results] == [[[1]]] * 3


async def _owned_by_new_user(pg_server: PgServer, attributes: str) -> tuple[str, str, str]:
    """A new database owned by a new user (not a superuser): (admin URL, the user's URL, user)."""
    user = f"owner{next(_users)}_{int(time.time())}"
    admin_url = await asyncio.to_thread(pg_server.new_database)
    name = admin_url.rsplit("/", 1)[1]
    await asyncio.to_thread(
        _admin,
        pg_server,
        admin_url,
        f'CREATE ROLE "{user}" LOGIN {attributes}',
        f'ALTER DATABASE "{name}" OWNER TO "{user}"',
    )
    return admin_url, admin_url.replace("talon@", f"{user}@"), user


async def test_a_database_user_that_may_create_roles_sets_the_role_up_itself(
    pg_server: PgServer, tmp_path: Path
) -> None:
    admin_url, url, _ = await _owned_by_new_user(pg_server, "CREATEROLE")
    db = await open_postgres(url, tmp_path)
    ctx = ToolContext(thread_id=1, persona=_persona(tmp_path), db=db, settings=Settings())
    try:
        await _seed(db)
        result = await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) AS n FROM messages"})
        assert result["rows"] == [[1]]
        assert (await _query(db, "SELECT current_user"))[0][0] == role_name(admin_url.rsplit("/", 1)[1])
        with pytest.raises(readonly.ReadOnlyQueryError, match="permission denied for table outbox"):
            await _query(db, "SELECT * FROM outbox")
    finally:
        await close_query_connections()
        await db.close()
        await asyncio.to_thread(pg_server.drop_database, admin_url)


async def test_a_database_user_that_may_not_create_roles_is_told_what_to_run(
    pg_server: PgServer, tmp_path: Path
) -> None:
    admin_url, url, user = await _owned_by_new_user(pg_server, "NOCREATEROLE")
    name = admin_url.rsplit("/", 1)[1]
    db = await open_postgres(url, tmp_path)  # the store itself needs no CREATEROLE
    settings = Settings(database={"url": url})
    persona = _persona(tmp_path)
    ctx = ToolContext(thread_id=1, persona=persona, db=db, settings=settings)
    try:
        await _seed(db)
        role = role_name(name)
        tables = ", ".join(f'"public"."{t}"' for t in ("memory_items", "messages", "schedules", "threads"))
        statements = [
            f'CREATE ROLE "{role}" NOLOGIN;',
            f'GRANT "{role}" TO "{user}";',
            f'GRANT USAGE ON SCHEMA "public" TO "{role}";',
            f'GRANT SELECT ON {tables} TO "{role}";',
        ]
        with pytest.raises(ToolError) as caught:
            await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) AS n FROM messages"})
        message = str(caught.value)
        assert message.startswith(
            f"db_query is not set up on this PostgreSQL database yet: Talon could not create the role {role} "
            "(permission denied to create role). A database administrator can run, in this database: "
        )
        assert message.endswith(" ".join(statements))
        findings = await database_findings(settings, [persona])
        assert (
            "warn",
            f"db_query (assistant) cannot run on this database yet: the role {role} does not exist yet and the "
            f"database user {user} may not create roles. A database administrator can run, in this database: "
            + " ".join(statements),
        ) in findings

        await asyncio.to_thread(_admin, pg_server, admin_url, *statements)
        result = await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) AS n FROM messages"})
        assert result["rows"] == [[1]]
        assert (
            "ok",
            f"db_query (assistant) runs as the role {role}, which may read only memory_items, messages, "
            "schedules, threads",
        ) in await database_findings(settings, [persona])
    finally:
        await close_query_connections()
        await db.close()
        await asyncio.to_thread(pg_server.drop_database, admin_url)


async def test_a_store_user_that_may_create_roles_hears_from_the_doctor_that_it_will(
    store: Database, tmp_path: Path
) -> None:
    assert store.url
    settings = Settings(database={"url": store.url})
    role = role_name(store.url.rsplit("/", 1)[1])
    findings = await database_findings(settings, [_persona(tmp_path)])
    assert ("ok", f"db_query (assistant) sets up its role {role} at its first query") in findings


async def test_another_table_everyone_may_read_keeps_db_query_from_running(
    store: Database, pg_server: PgServer, tmp_path: Path
) -> None:
    assert store.url
    ctx = ToolContext(thread_id=1, persona=_persona(tmp_path), db=store, settings=Settings())
    assert (await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) FROM messages"}))["rows"] == [[1]]
    await asyncio.to_thread(_admin, pg_server, store.url, "GRANT SELECT ON outbox TO PUBLIC")
    await close_query_connections()  # the role is checked again when the pool is opened again
    with pytest.raises(ToolError) as caught:
        await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) FROM messages"})
    assert """can read more than db_query's tables: "public"."outbox" (granted to PUBLIC?)""" in str(
        caught.value
    )
    assert 'REVOKE SELECT ON "public"."outbox" FROM PUBLIC;' in str(caught.value)
    await asyncio.to_thread(_admin, pg_server, store.url, "REVOKE SELECT ON outbox FROM PUBLIC")
    assert (await db_query.TOOL.handler(ctx, {"sql": "SELECT count(*) FROM messages"}))["rows"] == [[1]]
