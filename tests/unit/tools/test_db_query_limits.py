"""db_query under hostile load: time limits, a pool of connections, bounded memory, clear errors."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.personas import Persona
from gateway.store import readonly, readonly_pg
from gateway.store.db import Database
from tests.store_helpers import execute_sql, fetch_row
from tests.unit.tools.db_query_stores import ENGINES, SeededStores, close_query_connections
from tools.base import ToolContext, ToolError
from tools.host import db_query

# A 4-way self-join of this many messages runs for hours unless it is stopped.
SLOW_ROWS = 300
SLOW_SQL = "SELECT count(*) FROM messages a JOIN messages b JOIN messages c JOIN messages d"
FAST_SQL = "SELECT count(*) AS n FROM threads"


def text_of(size: int, char: str = "x") -> str:
    """SQL that builds ``char`` * ``size`` (a power of ten) with nested replace(), as a model might."""
    sql = f"'{char}'"
    for _ in range(len(str(size)) - 1):
        sql = f"replace({sql}, '{char}', '{char * 10}')"
    return sql


MEGABYTE_X = text_of(1_000_000)


async def _seed(database: Database) -> None:
    now = time.time()
    await execute_sql(
        database,
        "INSERT INTO threads (id, channel, chat_id, persona, created_at, updated_at) "
        "VALUES (1, 'console', 'c', 'assistant', ?, ?)",
        (now, now),
    )


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededStores]:
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


async def add_messages(db: Database, texts: list[str]) -> None:
    def write(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO messages (thread_id, role, text, created_at) VALUES (1, 'user', ?, 0)",
            [(t,) for t in texts],
        )

    await db.run_transaction(write)


async def run(ctx: ToolContext, sql: str, params: list[Any] | None = None, limit: int | None = None) -> Any:
    args: dict[str, Any] = {"sql": sql}
    if params is not None:
        args["params"] = params
    if limit is not None:
        args["limit"] = limit
    return await db_query.TOOL.handler(ctx, args)


async def timed(call: Awaitable[Any]) -> tuple[float, Any]:
    """(seconds taken, result or the exception raised)."""
    started = time.monotonic()
    try:
        outcome: Any = await call
    except Exception as exc:
        outcome = exc
    return time.monotonic() - started, outcome


async def peak_python_memory(ctx: ToolContext, call: Awaitable[Any]) -> tuple[int, Any]:
    """The most Python memory (all threads) allocated while ``call`` ran, and its result.

    A first query beforehand imports the SQL parser and opens a connection, which would
    otherwise be counted when the test runs alone."""
    await run(ctx, "SELECT 1")
    tracemalloc.start()
    try:
        result = await call
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


# ---------------------------------------------------------------- time limits and the pool


async def test_the_reported_like_query_is_refused_at_once_and_a_pattern_at_the_limit_ends_in_time(
    ctx: ToolContext,
) -> None:
    # As found: a 2.7 kB query, LIKE over 1 MB built with nested replace(); one SQLite step of
    # about 34 s, five in a row kept db_query busy for everyone.
    reported = f"SELECT {MEGABYTE_X} LIKE '%{'x' * 2600}y' AS hit"
    assert 2600 < len(reported) < 2900
    calls = [timed(run(ctx, reported)) for _ in range(5)] + [timed(run(ctx, FAST_SQL))]
    started = time.monotonic()
    outcomes = await asyncio.gather(*calls)
    assert time.monotonic() - started < 5
    for _, outcome in outcomes[:5]:
        assert isinstance(outcome, ToolError)
        assert "LIKE or GLOB pattern is longer than 200 bytes" in str(outcome)
    assert outcomes[5][1]["rows"] == [[1]]

    # The longest pattern allowed still ends within the time limit (2 s), whatever it answers.
    at_limit = f"SELECT {MEGABYTE_X} LIKE '%{'x' * 198}y' AS hit"
    seconds, outcome = await timed(run(ctx, at_limit))
    assert seconds < 5
    assert outcome == {"columns": ["hit"], "rows": [[0]], "row_count": 1, "truncated": False} or (
        isinstance(outcome, ToolError) and "longer than 2 s" in str(outcome)
    )


async def test_a_slow_query_does_not_hold_up_other_callers(
    ctx: ToolContext, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_query, "QUERY_TIME_BUDGET", 3.0)
    await add_messages(db, ["n"] * SLOW_ROWS)
    slow = [asyncio.create_task(timed(run(ctx, SLOW_SQL))) for _ in range(3)]
    await asyncio.sleep(0.3)  # the slow queries hold three connections
    assert (await run(ctx, FAST_SQL))["rows"] == [[1]]
    assert not any(task.done() for task in slow)  # answered while all three were still running
    for seconds, outcome in await asyncio.gather(*slow):
        assert isinstance(outcome, ToolError) and "longer than 3 s and was stopped" in str(outcome)
        assert seconds < 7


async def test_a_query_is_stopped_at_its_deadline_even_when_the_database_would_not_stop_it(
    ctx: ToolContext, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With SQLite's progress handler off (PostgreSQL's statement_timeout), only the wall-clock
    # timer (the client's cancel) can stop the query.
    if db.engine.name == "sqlite":
        monkeypatch.setattr(readonly, "_PROGRESS_STEPS", 0)
    else:
        monkeypatch.setattr(readonly_pg, "_statement_timeout", lambda budget: 0)
    monkeypatch.setattr(db_query, "QUERY_TIME_BUDGET", 0.3)
    await add_messages(db, ["n"] * 500)
    seconds, outcome = await timed(
        run(ctx, "SELECT count(*) FROM messages a JOIN messages b JOIN messages c")
    )
    assert isinstance(outcome, ToolError) and "longer than 0.3 s and was stopped" in str(outcome)
    assert seconds < 3
    assert (await run(ctx, FAST_SQL))["rows"] == [[1]]  # the interrupted connection serves again


async def test_a_caller_that_stops_waiting_does_not_block_the_next(
    ctx: ToolContext, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_query, "QUERY_TIME_BUDGET", 4.0)
    await add_messages(db, ["n"] * SLOW_ROWS)
    abandoned = asyncio.create_task(run(ctx, SLOW_SQL))
    await asyncio.sleep(0.3)
    abandoned.cancel()  # what the bridge does when a tool call times out
    seconds, outcome = await timed(run(ctx, FAST_SQL))
    assert outcome["rows"] == [[1]]
    assert seconds < 2  # the abandoned statement runs on until its 4 s deadline, elsewhere
    # Once it has been stopped, every connection of the pool is free again.
    await asyncio.sleep(4.5)
    outcomes = await asyncio.gather(*(run(ctx, FAST_SQL) for _ in range(readonly.POOL_SIZE)))
    assert [o["rows"] for o in outcomes] == [[[1]]] * readonly.POOL_SIZE


async def test_a_caller_finding_every_connection_busy_gets_a_clear_error_within_its_wait(
    ctx: ToolContext, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readonly, "POOL_SIZE", 2)
    monkeypatch.setattr(readonly, "POOL_WAIT", 0.3)
    monkeypatch.setattr(db_query, "QUERY_TIME_BUDGET", 3.0)
    await add_messages(db, ["n"] * SLOW_ROWS)
    slow = [asyncio.create_task(timed(run(ctx, SLOW_SQL))) for _ in range(2)]
    await asyncio.sleep(0.3)
    seconds, outcome = await timed(run(ctx, FAST_SQL))
    assert isinstance(outcome, ToolError)
    assert "all 2 database connections stayed busy with other queries for 0.3 s; try again" in str(outcome)
    assert seconds < 2.5  # well before the slow queries' 3 s deadline
    await asyncio.gather(*slow)
    assert (await run(ctx, FAST_SQL))["rows"] == [[1]]


async def _open_connections(db: Database) -> int:
    """db_query's connections: SQLite's threads, or PostgreSQL's sessions on this database."""
    if db.engine.name == "sqlite":
        return sum(t.name.startswith("db-query") for t in threading.enumerate())
    row = await fetch_row(
        db,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'talon-query'",
    )
    return int(row[0]) if row else 0


async def test_closing_stops_every_connection(ctx: ToolContext, db: Database) -> None:
    await add_messages(db, ["n"] * 10)
    await asyncio.gather(*(run(ctx, "SELECT count(*) FROM messages a JOIN messages b") for _ in range(4)))
    assert await _open_connections(db) == readonly.POOL_SIZE
    await close_query_connections()
    for _ in range(50):
        if not await _open_connections(db):
            break
        await asyncio.sleep(0.1)
    assert not await _open_connections(db)


# ---------------------------------------------------------------- search arguments


async def test_trim_with_a_long_character_set_is_refused_at_once(ctx: ToolContext) -> None:
    # 311 bytes of SQL that kept one SQLite step busy for 34 s: every character of 1 MB was
    # compared with 10,001 characters to strip.
    charset = f"replace({text_of(10_000)}, 'x', 'y') || 'x'"
    seconds, outcome = await timed(run(ctx, f"SELECT length(trim({MEGABYTE_X}, {charset}))"))
    assert seconds < 5
    assert isinstance(outcome, ToolError)
    assert "the characters trim() removes are 10,001 bytes long; at most 200 bytes are allowed" in str(
        outcome
    )
    with pytest.raises(ToolError, match="the characters ltrim"):
        await run(ctx, f"SELECT ltrim('abc', '{'y' * 300}')")
    with pytest.raises(ToolError, match="the characters rtrim"):
        await run(ctx, "SELECT rtrim('abc', ?)", ["y" * 300])


async def test_instr_and_replace_refuse_long_search_texts_and_answer_ordinary_ones(
    ctx: ToolContext, db: Database
) -> None:
    needle = f"substr({MEGABYTE_X}, 1, 50000) || 'y'"
    for sql, function in (
        (f"SELECT instr({MEGABYTE_X}, {needle})", "instr"),
        (f"SELECT length(replace(substr({MEGABYTE_X}, 2), {needle}, ''))", "replace"),
    ):
        seconds, outcome = await timed(run(ctx, sql))
        assert isinstance(outcome, ToolError), outcome
        assert f"the text {function}() looks for is 50,001 bytes long; at most 10,000" in str(outcome)
        assert seconds < 5
    await add_messages(db, ["  hello world.  "])
    result = await run(
        ctx,
        "SELECT instr(text, ?), replace(text, ?, 'X'), trim(text, ' .'), ltrim(text), rtrim(text, ?), "
        "instr(12345, 3), instr(replace(text, 'o', ?), 'w0'), instr(x'0102', x'02') FROM messages",
        ["world", "l", " .", "0"],
    )
    assert result["rows"] == [
        [9, "  heXXo worXd.  ", "hello world", "hello world.  ", "  hello world", 3, 9, 2]
    ]


# ---------------------------------------------------------------- memory and result size


async def test_a_row_of_forty_large_cells_is_cut_as_it_is_read(ctx: ToolContext, db: Database) -> None:
    await add_messages(db, ["x" * 400_000])
    columns = ", ".join(f"text AS c{i}" for i in range(40))  # 16 MB of cells in one row
    peak, result = await peak_python_memory(ctx, run(ctx, f"SELECT {columns} FROM messages"))
    assert peak < 5_000_000
    cells = result["rows"][0]
    assert len(cells) == 40 and result["truncated"] is True
    assert cells[0] == "x" * 100_000 + "…[truncated 300,000 bytes]"
    assert cells[9] == cells[0]
    assert cells[10] == cells[39] == "…[truncated 400,000 bytes]"  # the result's 1 MB is used up


async def test_rows_are_read_one_at_a_time_until_the_byte_budget(ctx: ToolContext, db: Database) -> None:
    await add_messages(db, ["y" * 20_000] * 300)  # 6 MB
    peak, result = await peak_python_memory(
        ctx, run(ctx, "SELECT id, text FROM messages ORDER BY id", limit=1000)
    )
    assert peak < 4_000_000
    assert result["truncated"] is True
    assert 45 <= result["row_count"] <= 50
    assert sum(len(text) for _, text in result["rows"]) <= readonly.RESULT_BYTE_BUDGET
    assert all(text == "y" * 20_000 for _, text in result["rows"])  # whole rows, none half-cut


async def test_long_cells_are_cut_at_a_character_boundary_and_say_what_was_cut(
    ctx: ToolContext, db: Database
) -> None:
    await add_messages(db, ["é" * 150_000])  # 300,000 bytes of UTF-8
    result = await run(ctx, "SELECT text, CAST(text AS BLOB) AS raw, length(text) AS n FROM messages")
    text, raw, length = result["rows"][0]
    assert text == "é" * 50_000 + "…[truncated 200,000 bytes]"
    assert raw["truncated_bytes"] == 200_000
    assert base64.b64decode(raw["base64"]) == ("é" * 50_000).encode()
    assert length == 150_000 and result["truncated"] is True


async def test_values_over_one_megabyte_are_refused_with_a_way_out(ctx: ToolContext, db: Database) -> None:
    # As found, forty such columns in one row took the daemon from 124 MB to 1.7 GB.
    columns = ", ".join(f"{MEGABYTE_X} || '{i}' AS c{i}" for i in range(40))
    with pytest.raises(ToolError, match=r"a value in the query is larger than 1,000,000 bytes"):
        await run(ctx, f"SELECT {columns}")
    await add_messages(db, ["short", "z" * 1_500_000])
    with pytest.raises(ToolError, match="leave out the column that holds it"):
        await run(ctx, "SELECT id, text FROM messages")
    assert (await run(ctx, "SELECT id, role FROM messages ORDER BY id"))["rows"] == [[1, "user"], [2, "user"]]


async def test_too_many_result_columns_are_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="the query returns more than 64 columns; select fewer"):
        await run(ctx, "SELECT " + ", ".join(["1"] * 65))
    assert len((await run(ctx, "SELECT " + ", ".join(["1"] * 64)))["rows"][0]) == 64


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
async def test_integers_the_database_cannot_hold_get_a_clear_error(
    ctx: ToolContext, db: Database, value: int
) -> None:
    with pytest.raises(ToolError) as caught:
        await run(ctx, "SELECT ? + 0 AS n", [value])
    message = str(caught.value)
    engine = "SQLite" if db.engine.name == "sqlite" else "PostgreSQL"
    assert message.startswith(f"params[0] is an integer outside the range {engine} stores")
    assert "-9223372036854775808 to 9223372036854775807" in message


async def test_integers_at_the_edges_of_the_range_work(ctx: ToolContext) -> None:
    result = await run(ctx, "SELECT ?, ?", [2**63 - 1, -(2**63)])
    assert result["rows"] == [[2**63 - 1, -(2**63)]]


async def test_text_the_database_cannot_take_gets_a_clear_error(ctx: ToolContext, db: Database) -> None:
    with pytest.raises(ToolError, match=r"params\[1\] contains '\\ud800', a lone UTF-16 surrogate"):
        await run(ctx, "SELECT ?, ?", ["ok", "a\ud800b"])
    with pytest.raises(ToolError, match=r"sql contains .* a lone UTF-16 surrogate"):
        await run(ctx, "SELECT 'a\udfff'")
    with pytest.raises(ToolError, match=r"params\[0\] is 1,500,000 bytes of text; at most 1,000,000"):
        await run(ctx, "SELECT length(?)", ["p" * 1_500_000])
    if db.engine.name == "postgresql":
        with pytest.raises(
            ToolError, match=r"params\[0\] contains a NUL character, which PostgreSQL text cannot hold"
        ):
            await run(ctx, "SELECT length(?)", ["a\x00b"])
    else:  # SQLite's text holds it
        assert (await run(ctx, "SELECT length(?)", ["a\x00b"]))["rows"] == [[1]]
