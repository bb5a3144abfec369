"""db_query: hostile SQL is refused or confined to the caller; legitimate queries answer correctly."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.personas import Persona
from gateway.store import readonly, readonly_pg
from gateway.store.db import Database
from tests.store_helpers import execute_sql, fetch_rows
from tests.unit.tools.db_query_stores import ENGINES, SeededStores
from tools.base import ToolContext, ToolError
from tools.host import db_query
from tools.host.sql_guard import prepare_query

# Every row that belongs to someone else carries this marker somewhere in its text columns.
FOREIGN = "FOREIGN"


async def _seed(db: Database) -> None:
    now = time.time()

    def write(conn: sqlite3.Connection) -> None:
        for tid, chat, persona in (
            (1, "mine", "assistant"),
            (2, f"{FOREIGN}-chat", "assistant"),
            (3, f"{FOREIGN}-3", "other"),
        ):
            conn.execute(
                "INSERT INTO threads (id, channel, chat_id, persona, title, created_at, updated_at) VALUES (?, 'console', ?, ?, ?, ?, ?)",
                (tid, chat, persona, "own title" if tid == 1 else f"{FOREIGN} title", now, now),
            )
        own = [
            ("user", "hello"),
            ("assistant", "hi there"),
            ("user", "what is the plan"),
            ("assistant", "ship it"),
        ]
        for i, (role, text) in enumerate(own):
            conn.execute(
                "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, ?, ?, ?)",
                (role, text, now + i),
            )
        for tid in (2, 3):
            for i in range(3):
                conn.execute(
                    "INSERT INTO messages (thread_id, role, text, created_at) VALUES (?, 'user', ?, ?)",
                    (tid, f"{FOREIGN} secret {tid}.{i}", now + i),
                )
        items = [
            (1, "city", "fact", "Lisbon"),
            (1, "tone", "note", "brief"),
            (1, "lang", "fact", "pt"),
            (2, "pin", "fact", f"{FOREIGN} 1234"),
        ]
        for tid, key, kind, value in items:
            conn.execute(
                "INSERT INTO memory_items (thread_id, persona, key, type, value, created_at, updated_at) VALUES (?, 'assistant', ?, ?, ?, ?, ?)",
                (tid, key, kind, value, now, now),
            )
        # The persona's schedules are its own wherever they were created; other personas' are not.
        schedules = [
            ("s-a1", "assistant", 1, "daily digest"),
            ("s-a2", "assistant", 2, "weekly report"),
            ("s-o1", "other", 3, f"{FOREIGN} job"),
        ]
        for sid, persona, tid, label in schedules:
            conn.execute(
                "INSERT INTO schedules (id, persona, thread_id, label, cron_expr, prompt, created_at, updated_at) VALUES (?, ?, ?, ?, '0 9 * * *', 'go', ?, ?)",
                (sid, persona, tid, label, now, now),
            )

    await db.run_transaction(write)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededStores]:
    """One seeded store per engine and module; each test works on its own copy."""
    stores = SeededStores(_seed, tmp_path_factory.mktemp("seed"))
    yield stores
    stores.drop()


@pytest.fixture(params=ENGINES)
async def db(request: pytest.FixtureRequest, seeded: SeededStores, tmp_path: Path) -> AsyncIterator[Database]:
    async for database in seeded.copy(request, request.param, tmp_path):
        yield database


@pytest.fixture
def ctx(db: Database, tmp_path: Path) -> ToolContext:
    persona = Persona(
        name="assistant",
        provider="local",
        model="m",
        description=None,
        capabilities=("db.query:own",),
        system_prompt="# Assistant",
        path=tmp_path,
    )
    return ToolContext(thread_id=1, persona=persona, db=db, settings=Settings())


async def run(
    ctx: ToolContext, sql: str, params: list[Any] | None = None, limit: int | None = None
) -> dict[str, Any]:
    args: dict[str, Any] = {"sql": sql}
    if params is not None:
        args["params"] = params
    if limit is not None:
        args["limit"] = limit
    return await db_query.TOOL.handler(ctx, args)


# ---------------------------------------------------------------- legitimate queries


@pytest.mark.shared_store
async def test_count_of_messages_counts_only_this_thread(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT count(*) AS n FROM messages")
    assert result == {"columns": ["n"], "rows": [[4]], "row_count": 1, "truncated": False}


@pytest.mark.shared_store
async def test_last_messages_newest_first(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT role, text FROM messages ORDER BY id DESC LIMIT 5")
    assert result["rows"] == [
        ["assistant", "ship it"],
        ["user", "what is the plan"],
        ["assistant", "hi there"],
        ["user", "hello"],
    ]


@pytest.mark.shared_store
async def test_memory_items_by_type_with_a_parameter(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT key, value FROM memory_items WHERE type = ? ORDER BY key", ["fact"])
    assert result["rows"] == [["city", "Lisbon"], ["lang", "pt"]]


@pytest.mark.shared_store
async def test_join_messages_with_threads(ctx: ToolContext) -> None:
    sql = (
        "SELECT t.chat_id, t.title, count(m.id) AS n FROM threads AS t "
        "JOIN messages m ON m.thread_id = t.id GROUP BY t.id"
    )
    assert (await run(ctx, sql))["rows"] == [["mine", "own title", 4]]


@pytest.mark.shared_store
async def test_group_by_role(ctx: ToolContext) -> None:
    sql = "SELECT role, count(*) AS n, group_concat(text, ' | ') AS texts FROM messages GROUP BY role ORDER BY role"
    result = await run(ctx, sql)
    assert result["columns"] == ["role", "n", "texts"]
    assert result["rows"] == [["assistant", 2, "hi there | ship it"], ["user", 2, "hello | what is the plan"]]


@pytest.mark.shared_store
async def test_schedules_are_the_personas_own(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT id, label FROM schedules ORDER BY id")
    assert result["rows"] == [["s-a1", "daily digest"], ["s-a2", "weekly report"]]


@pytest.mark.shared_store
async def test_placeholders_bind_in_textual_order_even_in_limit_offset(ctx: ToolContext) -> None:
    # SQLite reads "LIMIT a, b" as OFFSET a LIMIT b; the values must follow the text.
    result = await run(ctx, "SELECT text FROM messages WHERE role = ? ORDER BY id LIMIT ?, ?", ["user", 1, 5])
    assert result["rows"] == [["what is the plan"]]


@pytest.mark.shared_store
async def test_placeholders_after_non_ascii_text_bind_correctly(ctx: ToolContext) -> None:
    result = await run(
        ctx,
        "SELECT text FROM messages WHERE text <> '日本 é 😀' AND role = ? ORDER BY id LIMIT 1",
        ["assistant"],
    )
    assert result["rows"] == [["hi there"]]


@pytest.mark.shared_store
async def test_functions_and_operators_in_the_allowlist_work(ctx: ToolContext) -> None:
    sql = (
        "SELECT upper(substr(text, 1, 2)) AS a, length(text) AS b, coalesce(NULL, 'x') AS c, "
        "strftime('%Y', 0, 'unixepoch') AS d, json_extract('{\"k\": 5}', '$.k') AS e, "
        "CASE WHEN role = 'user' THEN 'u' ELSE 'a' END AS f, text || '!' AS g, "
        "row_number() OVER (ORDER BY id DESC) AS h "
        "FROM messages WHERE text LIKE 'h%' AND id BETWEEN 1 AND 100 AND role IN ('user', 'assistant') ORDER BY id"
    )
    result = await run(ctx, sql)
    assert result["rows"] == [
        ["HE", 5, "x", "1970", 5, "u", "hello!", 2],
        ["HI", 8, "x", "1970", 5, "a", "hi there!", 1],
    ]


async def test_stored_timestamps_and_sqlite_idioms_answer_the_same_on_both_engines(
    ctx: ToolContext, db: Database
) -> None:
    # created_at holds Unix seconds (a REAL on SQLite, a DOUBLE PRECISION on PostgreSQL).
    await execute_sql(
        db,
        "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', ?, ?)",
        ("  hello world.  ", 1_700_000_000.5),
    )
    sql = (
        "SELECT datetime(created_at, 'unixepoch') AS t, "
        "date(created_at, 'unixepoch', 'start of month', '+1 month') AS next_month, "
        "strftime('%Y-%m-%d %H:%M', created_at, 'unixepoch') AS minute, CAST(created_at AS INTEGER) AS whole, "
        "CAST(julianday('2024-03-01') - julianday('2024-02-01') AS INTEGER) AS days, "
        "substr(trim(text), -6) AS tail, typeof(created_at) AS kind, iif(text GLOB '*world*', 'yes', 'no') AS g, "
        "text LIKE '%HELLO%' AS ci, json_extract('{\"a\": [1, {\"b\": \"x\"}]}', '$.a[1].b') AS j, "
        "round(created_at / 3600, 1) AS hours, strftime('%s', '2024-01-01') - created_at AS age "
        "FROM messages WHERE created_at < ?"
    )
    result = await run(ctx, sql, [1_750_000_000])
    assert result["rows"] == [
        [
            "2023-11-14 22:13:20",
            "2023-12-01",
            "2023-11-14 22:13",
            1_700_000_000,
            29,
            "world.",
            "real",
            "yes",
            1,
            "x",
            472222.2,
            4_067_199.5,
        ]
    ]
    totals = await run(
        ctx,
        "SELECT sum(role = 'user') AS users, total(length(text)) AS chars, count(*) FILTER (WHERE role = 'assistant') AS a, "
        "max(created_at) > 1600000000 AS recent FROM messages",
    )
    assert totals["rows"] == [[3, 52.0, 2, 1]]


@pytest.mark.shared_store
async def test_limit_cuts_and_reports_truncation(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT id FROM messages ORDER BY id", limit=2)
    assert result["row_count"] == 2 and result["truncated"] is True
    exact = await run(ctx, "SELECT id FROM messages ORDER BY id", limit=4)
    assert exact["row_count"] == 4 and exact["truncated"] is False


async def test_default_limit_is_100(ctx: ToolContext, db: Database) -> None:
    def write(conn: sqlite3.Connection) -> None:
        for i in range(150):
            conn.execute(
                "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', ?, 0)",
                (f"bulk {i}",),
            )

    await db.run_transaction(write)
    result = await run(ctx, "SELECT id FROM messages")
    assert result["row_count"] == 100 and result["truncated"] is True


@pytest.mark.shared_store
async def test_oversized_results_are_cut(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readonly, "RESULT_BYTE_BUDGET", 13)
    result = await run(ctx, "SELECT text FROM messages ORDER BY id")
    assert result["rows"] == [["hello"], ["hi there"]]
    assert result["row_count"] == 2 and result["truncated"] is True


async def test_new_writes_are_visible_to_the_next_query(ctx: ToolContext, db: Database) -> None:
    assert (await run(ctx, "SELECT count(*) FROM messages"))["rows"] == [[4]]
    await execute_sql(
        db, "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', 'later', 0)"
    )
    assert (await run(ctx, "SELECT count(*) FROM messages"))["rows"] == [[5]]


@pytest.mark.shared_store
async def test_connections_reopen_after_close(ctx: ToolContext) -> None:
    await run(ctx, "SELECT 1")
    await readonly.close_readonly_connections()
    assert (await run(ctx, "SELECT count(*) FROM threads"))["rows"] == [[1]]


@pytest.mark.shared_store
async def test_blobs_come_back_as_base64(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT x'00ff' AS b")
    assert result["rows"] == [[{"base64": "AP8="}]]


@pytest.mark.shared_store
async def test_the_database_file_is_never_written(ctx: ToolContext, db: Database) -> None:
    before = [
        tuple(r)
        for r in await fetch_rows(db, "SELECT count(*) FROM messages UNION ALL SELECT count(*) FROM threads")
    ]
    for sql in ("DELETE FROM messages", "DROP TABLE messages", "UPDATE threads SET title = 'x'"):
        with pytest.raises(ToolError):
            await run(ctx, sql)
    after = [
        tuple(r)
        for r in await fetch_rows(db, "SELECT count(*) FROM messages UNION ALL SELECT count(*) FROM threads")
    ]
    assert before == after


# ---------------------------------------------------------------- hostile queries

# (sql, params, a phrase the refusal must contain). Each is refused with a reason.
REFUSED: list[tuple[str, list[Any] | None, str]] = [
    # several statements, comment tricks
    ("SELECT text FROM messages /* x */ ; DROP TABLE messages", None, "exactly one statement"),
    ("SELECT text FROM messages; DELETE FROM messages", None, "exactly one statement"),
    ("SELECT 1; SELECT 2", None, "exactly one statement"),
    ("BEGIN; SELECT 1", None, "exactly one statement"),
    ("", None, "sql is required"),
    ("-- only a comment", None, "exactly one statement"),
    # subqueries in every clause
    ("SELECT (SELECT text FROM messages WHERE thread_id = 2)", None, "subqueries"),
    ("SELECT * FROM (SELECT * FROM messages)", None, "subqueries"),
    ("SELECT text FROM messages WHERE id IN (SELECT id FROM messages)", None, "subqueries"),
    (
        "SELECT role FROM messages GROUP BY role HAVING count(*) > (SELECT count(*) FROM messages)",
        None,
        "subqueries",
    ),
    ("SELECT text FROM messages ORDER BY (SELECT 1)", None, "subqueries"),
    (
        "SELECT m.text FROM messages m JOIN threads t ON t.id = (SELECT max(id) FROM threads)",
        None,
        "subqueries",
    ),
    ("SELECT length((SELECT group_concat(text) FROM messages))", None, "subqueries"),
    ("SELECT text FROM messages WHERE id IN (1, (SELECT 2))", None, "subqueries"),
    (
        "SELECT text FROM messages WHERE EXISTS (SELECT 1 FROM messages WHERE thread_id = 2)",
        None,
        "subqueries",
    ),
    ("SELECT CASE WHEN 1 THEN (SELECT 1) END FROM messages", None, "subqueries"),
    ("SELECT * FROM threads JOIN (SELECT * FROM messages) m ON 1", None, "subqueries"),
    ("SELECT * FROM (messages JOIN threads ON 1)", None, "subqueries"),
    ("SELECT text FROM messages WHERE thread_id IN messages", None, "IN must list values"),
    ("SELECT text FROM messages WHERE thread_id NOT IN threads", None, "IN must list values"),
    # compound queries and CTEs
    ("WITH t AS (SELECT * FROM messages) SELECT * FROM t", None, "WITH"),
    ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c", None, "WITH"),
    ("SELECT text FROM messages UNION SELECT text FROM messages", None, "UNION"),
    ("SELECT id FROM messages EXCEPT SELECT 1", None, "UNION, EXCEPT and INTERSECT"),
    ("SELECT id FROM messages INTERSECT SELECT id FROM messages", None, "UNION, EXCEPT and INTERSECT"),
    # SQLite internals, other tables, table-valued functions
    ("SELECT * FROM sqlite_master", None, "internal to SQLite"),
    ("SELECT sql FROM sqlite_schema", None, "internal to SQLite"),
    ("SELECT * FROM sqlite_temp_master", None, "internal to SQLite"),
    ("SELECT * FROM temp.sqlite_master", None, "without a schema"),
    ("SELECT * FROM main.messages", None, "without a schema"),
    ("SELECT * FROM queue_items", None, "cannot be read"),
    ("SELECT * FROM [outbox]", None, "cannot be read"),
    ('SELECT * FROM "audit_log"', None, "cannot be read"),
    ("SELECT * FROM messages INDEXED BY messages_by_thread WHERE thread_id = 2", None, "cannot be read"),
    ("SELECT * FROM pragma_table_info('messages')", None, "table-valued functions"),
    ("SELECT * FROM json_each('[1, 2]')", None, "table-valued functions"),
    ("SELECT * FROM messages, json_each(messages.attachments)", None, "table-valued functions"),
    # dangerous or flooding functions
    ("SELECT load_extension('/tmp/evil.so')", None, "load_extension() is not allowed"),
    ("SELECT randomblob(1e9)", None, "randomblob() is not allowed"),
    ("SELECT zeroblob(1000000000)", None, "zeroblob() is not allowed"),
    ("SELECT hex(randomblob(1000000)) FROM messages", None, "is not allowed"),
    ("SELECT readfile('/etc/passwd')", None, "readfile() is not allowed"),
    ("SELECT writefile('/tmp/x', 'y')", None, "writefile() is not allowed"),
    ("SELECT printf('%.*c', 1000000000, 'x')", None, "printf() is not allowed"),
    ("SELECT sqlite_version()", None, "sqlite_version() is not allowed"),
    # PostgreSQL's functions that read files, wait, run SQL of their own or change the session
    ("SELECT pg_read_file('/etc/passwd')", None, "pg_read_file() is not allowed"),
    ("SELECT pg_sleep(10)", None, "pg_sleep() is not allowed"),
    ("SELECT set_config('role', 'talon', true)", None, "set_config() is not allowed"),
    ("SELECT query_to_xml('SELECT * FROM outbox', true, false, '')", None, "query_to_xml() is not allowed"),
    ("SELECT dblink('dbname=talon', 'SELECT 1')", None, "dblink() is not allowed"),
    ("SELECT current_setting('data_directory')", None, "current_setting() is not allowed"),
    ("SELECT * FROM pg_catalog.pg_authid", None, "without a schema"),
    ("SELECT * FROM pg_stat_activity", None, "cannot be read"),
    ("SELECT * FROM generate_series(1, 10)", None, "table-valued functions"),
    # Talon's own functions, which only the SQL check's rewriting may call
    ("SELECT __talon_short(text, 1000000, 'instr') FROM messages", None, "__talon_short() is not allowed"),
    ("SELECT __talon_substr(text, 1) FROM messages", None, "__talon_substr() is not allowed"),
    ("SELECT count(*) FROM messages WHERE text REGEXP 'a'", None, "is not allowed"),
    # other statements
    ("PRAGMA table_info(messages)", None, "only SELECT"),
    ("ATTACH DATABASE '/tmp/x.db' AS x", None, "only SELECT"),
    (
        "INSERT INTO messages (thread_id, role, text, created_at) VALUES (2, 'user', 'x', 0)",
        None,
        "only SELECT",
    ),
    ("UPDATE messages SET text = 'x'", None, "only SELECT"),
    ("DELETE FROM messages", None, "only SELECT"),
    ("REPLACE INTO threads (id) VALUES (1)", None, "only SELECT"),
    ("CREATE TABLE x (a)", None, "only SELECT"),
    ("DROP TABLE messages", None, "only SELECT"),
    ("VACUUM INTO '/tmp/copy.db'", None, "only SELECT"),
    ("EXPLAIN SELECT * FROM messages", None, "only SELECT"),
    ("VALUES (1)", None, "only SELECT"),
    ("SELECT 1 INTO x FROM messages", None, "not supported"),
    # unicode lookalikes
    ("\uff33\uff25\uff2c\uff25\uff23\uff34 * FROM messages", None, "could not parse"),
    ("S\u0415LECT * FROM messages", None, "could not parse"),
    ("SELECT * FROM m\u0435ssages", None, "cannot be read"),
    ('SELECT * FROM "thr\u0435ads"', None, "cannot be read"),
    ("SELECT * FROM queue\u200b_items", None, ""),
    # parameter tricks
    ("SELECT text FROM messages WHERE thread_id = :thread", [2], "named parameters"),
    ("SELECT text FROM messages WHERE thread_id = :__talon_thread", [], "named parameters"),
    ("SELECT text FROM messages WHERE thread_id = @t", [2], "named parameters"),
    ("SELECT text FROM messages WHERE thread_id = $t", [2], "named parameters"),
    ("SELECT text FROM messages WHERE thread_id = ?1", [2], "numbered parameter"),
    ("SELECT text FROM messages WHERE thread_id = ?", [], "1 ? placeholder(s) but params has 0"),
    ("SELECT text FROM messages", [2], "0 ? placeholder(s) but params has 1"),
    ("SELECT text FROM messages WHERE text = ?", [{"a": 1}], "params[0]"),
    ("SELECT text FROM messages WHERE text = ?", "2", "params must be an array"),  # type: ignore[list-item]
]


@pytest.mark.shared_store
@pytest.mark.parametrize(("sql", "params", "phrase"), REFUSED, ids=[r[0][:50] for r in REFUSED])
async def test_hostile_query_is_refused(
    ctx: ToolContext, sql: str, params: list[Any] | None, phrase: str
) -> None:
    with pytest.raises(ToolError) as caught:
        await run(ctx, sql, params)
    assert phrase in str(caught.value)
    assert FOREIGN not in str(caught.value)


# Queries that run, but can only ever see the caller's rows.
SCOPED: list[tuple[str, list[Any] | None]] = [
    ("SELECT * FROM messages WHERE thread_id = 2 OR 1 = 1", None),
    ("SELECT * FROM messages WHERE thread_id = ?", [2]),
    ("SELECT text FROM messages WHERE text = ?", ["x' OR 1=1 --"]),
    ("SELECT * FROM threads WHERE id = 2", None),
    ("SELECT * FROM threads", None),
    ("SELECT * FROM memory_items", None),
    ("SELECT * FROM schedules", None),
    ("SELECT * FROM messages AS threads JOIN threads AS messages ON 1", None),
    ("SELECT * FROM messages m LEFT JOIN threads t ON t.id = 2", None),
    ("SELECT * FROM messages NATURAL JOIN memory_items", None),
    ("SELECT messages.* FROM threads, messages", None),
    ("SELECT max(id), min(thread_id), max(thread_id) FROM messages", None),
    ("SELECT count(*) OVER (PARTITION BY thread_id), thread_id, text FROM messages", None),
    ("SELECT sum(1) OVER (), group_concat(text) OVER (ORDER BY thread_id DESC) FROM messages", None),
    ("SELECT * FROM messages NOT INDEXED ORDER BY thread_id DESC", None),
    ("SELECT * FROM MESSAGES", None),
    ('SELECT * FROM "Messages" WHERE "Messages".thread_id <> 1', None),
    ("SELECT * FROM messages LIMIT -1", None),
    ("SELECT * FROM messages ORDER BY thread_id DESC LIMIT 1 OFFSET 0", None),
    ("SELECT text FROM messages -- ; DELETE FROM messages", None),
    ("SELECT text FROM messages /* WHERE 1 */ WHERE thread_id = 2", None),
    ("SELECT/**/text/**/FROM/**/messages/**/WHERE/**/thread_id/**/=/**/2", None),
    ("SELECT text FROM messages; -- trailing comment", None),
    ("SELECT * FROM messages m JOIN messages m2 ON m2.thread_id <> m.thread_id", None),
    ("SELECT * FROM threads t JOIN memory_items mi ON mi.thread_id = t.id + 1", None),
    ("SELECT s.*, m.text FROM schedules s JOIN messages m ON m.thread_id = s.thread_id", None),
]


@pytest.mark.shared_store
@pytest.mark.parametrize(("sql", "params"), SCOPED, ids=[s[0][:50] for s in SCOPED])
async def test_scope_bypass_attempts_see_only_own_rows(
    ctx: ToolContext, sql: str, params: list[Any] | None
) -> None:
    result = await run(ctx, sql, params)
    assert FOREIGN not in json.dumps(result)
    # thread_id columns, wherever they appear, name only this thread (or schedules' threads of this persona).
    for row in result["rows"]:
        for column, value in zip(result["columns"], row, strict=True):
            if column == "thread_id" and value is not None:
                assert value in (1, 2) if "schedules" in sql else value == 1


def test_hostile_corpus_is_large_enough() -> None:
    assert len(REFUSED) + len(SCOPED) >= 40


def test_the_executed_sql_is_regenerated_and_scoped() -> None:
    prepared = prepare_query(
        "SELECT m.text /* c */ FROM messages AS m WHERE m.role = ?", ["user"], 10, thread_id=7, persona="p"
    )
    assert "/*" not in prepared.sql
    assert "(SELECT * FROM messages WHERE thread_id = :__talon_thread) AS m" in prepared.sql
    assert dict(prepared.params) == {"__p1": "user", "__talon_thread": 7, "__talon_persona": "p"}


@pytest.mark.shared_store
@pytest.mark.parametrize("limit", [0, 1001, -5, "10", True, 2.5])
async def test_bad_limit_is_refused(ctx: ToolContext, limit: Any) -> None:
    with pytest.raises(ToolError, match="limit must be a whole number from 1 to 1000"):
        await run(ctx, "SELECT 1", limit=limit)


@pytest.mark.shared_store
async def test_oversized_sql_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="keep it under"):
        await run(ctx, "SELECT " + " + ".join(["1"] * 10_000))


@pytest.mark.shared_store
async def test_deep_nesting_is_refused_not_crashing(ctx: ToolContext) -> None:
    with pytest.raises(ToolError):
        await run(ctx, "SELECT " + "(" * 3000 + "1" + ")" * 3000)


async def test_value_flood_stops_at_the_size_limit(ctx: ToolContext, db: Database) -> None:
    await execute_sql(
        db, "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', ?, 0)", ("x" * 5000,)
    )
    sql = (
        "SELECT length(replace(replace(text, 'x', text), 'x', text)) FROM messages WHERE length(text) = 5000"
    )
    with pytest.raises(ToolError, match="too big"):
        await run(ctx, sql)


async def test_heavy_query_is_interrupted(
    ctx: ToolContext, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_query, "QUERY_TIME_BUDGET", 0.2)

    def write(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', 'n', 0)", [()] * 300
        )

    await db.run_transaction(write)
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"longer than 0\.2 s and was stopped"):
        await run(ctx, "SELECT count(*) FROM messages a JOIN messages b JOIN messages c JOIN messages d")
    assert time.monotonic() - started < 3
    # The connection is still usable afterwards.
    assert (await run(ctx, "SELECT count(*) FROM threads"))["rows"] == [[1]]


# Statements the SQL check never lets through, sent to the read-only connections directly:
# the database refuses each itself (SQLite's authorizer; PostgreSQL's role, see also
# test_db_query_postgres.py).
BYPASSING = {
    "sqlite": (
        "SELECT * FROM sqlite_master",
        "SELECT * FROM queue_items",
        "SELECT randomblob(10)",
        "SELECT * FROM pragma_table_info('messages')",
        "PRAGMA table_info(messages)",
        "ATTACH ':memory:' AS x",
        "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('a', 'b', 1, 1)",
        "CREATE TEMP TABLE t (a)",
    ),
    "postgresql": (
        "SELECT * FROM outbox",
        "SELECT * FROM queue_items",
        "SELECT count(*) FROM audit_log",
        "SELECT * FROM pg_authid",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT pg_ls_dir('.')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT m.text FROM messages m JOIN outbox o ON true",
    ),
}


@pytest.mark.shared_store
async def test_the_database_refuses_what_the_syntax_check_would_have_caught(db: Database) -> None:
    """Defence in depth: raw statements on the read-only connections are refused by the database."""
    pool: readonly.ReadOnlyPool | readonly_pg.PgReadOnlyPool
    if db.engine.name == "sqlite":
        pool = readonly.readonly_pool(db.path, db_query.ACCESS)
    else:
        assert db.url
        pool = readonly_pg.pg_readonly_pool(db.url, db_query.ACCESS)
    for sql in BYPASSING[db.engine.name]:
        with pytest.raises(readonly.ReadOnlyQueryError) as caught:
            await pool.query(sql, {}, 5, 1.0)
        assert caught.value.problem == "denied", (sql, caught.value.detail)
    result = await pool.query("SELECT count(*) FROM messages", {}, 5, 1.0)
    assert result.rows == [[10]]  # every thread's: the scoping is the SQL check's part
