"""wait_for: each condition met, timed out and refused; the poll schedule; a new message yields."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from connectors.base import ThreadKey
from gateway.config import NetHttpSettings, Settings
from gateway.sandbox import sandbox_problem
from gateway.store.db import Database, open_database
from gateway.store.messages import add_message
from gateway.store.queue import enqueue_message
from gateway.store.threads import upsert_thread
from tools.base import ToolContext, ToolError
from tools.workspace import wait_for as tool
from tools.workspace.shell import run_bash

no_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
FILES = ("shell.exec:sandbox", "fs.read:thread", "fs.write:thread")


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "data" / "talon.db")
    yield database
    await database.close()


@pytest.fixture
async def thread_id(db: Database) -> int:
    row = await db.run_transaction(
        upsert_thread, ThreadKey("console", "main"), chat_type="dm", persona="assistant", now=time.time()
    )
    return row.id


@pytest.fixture
def waiter(make_ctx: Callable[..., ToolContext], db: Database, thread_id: int) -> Callable[..., ToolContext]:
    def build(labels: tuple[str, ...] = FILES, **kwargs: Any) -> ToolContext:
        ctx = make_ctx(thread_id=thread_id, labels=labels, **kwargs)
        ctx.db = db
        return ctx

    return build


async def wait(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await tool.wait_for(ctx, args)


async def user_writes(db: Database, thread_id: int, text: str = "are you there?") -> None:
    def store(conn: Any) -> None:
        message_id = add_message(conn, thread_id, "user", text, created_at=time.time())
        enqueue_message(conn, thread_id, message_id, available_at=time.time(), now=time.time())

    await db.run_transaction(store)


def test_the_pause_between_polls_follows_the_backoff() -> None:
    assert [tool._delay(5.0, "none", n) for n in (1, 2, 3)] == [5.0, 5.0, 5.0]
    assert [tool._delay(5.0, "linear", n) for n in (1, 2, 3)] == [5.0, 10.0, 15.0]
    assert [tool._delay(5.0, "exponential", n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]


async def test_a_file_that_exists_is_met_at_once(
    waiter: Callable[..., ToolContext], settings: Settings
) -> None:
    ctx = waiter()
    workspace = settings.data_path / "workspaces" / "assistant" / "threads" / str(ctx.thread_id)
    workspace.mkdir(parents=True)
    (workspace / "done.txt").write_text("build finished: ok\n")
    result = await wait(ctx, type="file", path="/workspace/done.txt", content_contains="finished: ok")
    assert result["status"] == "met" and result["polls"] == 1 and result["path"] == "/workspace/done.txt"


async def test_a_file_that_appears_later_is_met_on_a_later_poll(
    waiter: Callable[..., ToolContext], settings: Settings
) -> None:
    ctx = waiter()
    workspace = settings.data_path / "workspaces" / "assistant" / "threads" / str(ctx.thread_id)

    async def later() -> None:
        await asyncio.sleep(0.3)
        (workspace / "out").mkdir(parents=True, exist_ok=True)
        (workspace / "out" / "result.json").write_text("{}")

    writer = asyncio.create_task(later())
    result = await wait(ctx, type="file", path="out/result.json", poll_interval_ms=1000, timeout_ms=10_000)
    await writer
    assert result["status"] == "met" and result["polls"] == 2


async def test_a_wait_times_out_as_an_answer(waiter: Callable[..., ToolContext]) -> None:
    result = await wait(waiter(), type="file", path="never.txt", timeout_ms=1200, poll_interval_ms=1000)
    # polled at the start, after the interval, and once more at the deadline
    assert result["status"] == "timed_out" and result["polls"] == 3
    assert 1200 <= result["elapsed_ms"] and "not an error" in result["note"]


async def test_a_new_message_in_the_thread_ends_the_wait(
    waiter: Callable[..., ToolContext], db: Database, thread_id: int
) -> None:
    async def later() -> None:
        await asyncio.sleep(0.2)
        await user_writes(db, thread_id)

    writer = asyncio.create_task(later())
    result = await wait(waiter(), type="file", path="never.txt", timeout_ms=60_000, poll_interval_ms=30_000)
    await writer
    assert result["status"] == "yielded_to_user" and result["elapsed_ms"] < 30_000
    assert "end your turn" in result["note"]


async def test_a_path_outside_the_roots_is_refused(waiter: Callable[..., ToolContext]) -> None:
    with pytest.raises(
        ToolError, match=r"'/etc/passwd' is outside the workspace; this call may use /workspace"
    ):
        await wait(waiter(), type="file", path="/etc/passwd")
    with pytest.raises(ToolError, match="climbs above /workspace"):
        await wait(waiter(), type="file", path="../../../talon.db")
    with pytest.raises(ToolError, match="is in a root this persona's labels do not open"):
        await wait(waiter(), type="file", path="/shared/x")


async def test_the_shell_label_alone_still_waits_on_the_thread_workspace(
    waiter: Callable[..., ToolContext],
) -> None:
    result = await wait(waiter(labels=("shell.exec:sandbox",)), type="file", path="/workspace", timeout_ms=1)
    assert result["status"] == "met"


async def test_bad_arguments_say_what_to_send(waiter: Callable[..., ToolContext]) -> None:
    ctx = waiter()
    with pytest.raises(ToolError, match="type must be one of url, file, process or command"):
        await wait(ctx, type="socket")
    with pytest.raises(ToolError, match="type file needs path"):
        await wait(ctx, type="file")
    with pytest.raises(ToolError, match="timeout_ms must be a positive number of milliseconds"):
        await wait(ctx, type="file", path="a", timeout_ms=-5)
    with pytest.raises(ToolError, match="backoff must be none, linear or exponential"):
        await wait(ctx, type="file", path="a", backoff="fibonacci")
    with pytest.raises(ToolError, match="type process needs pid"):
        await wait(ctx, type="process", pid="12")
    with pytest.raises(ToolError, match="pid 1 is not a background job of this thread"):
        await wait(ctx, type="process", pid=1)


# ---------------------------------------------------------------- url


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[str]]]:
    hits: list[str] = []
    ready_after = time.monotonic() + 0.5

    async def health(request: web.Request) -> web.Response:
        hits.append(request.method)
        if time.monotonic() < ready_after:
            return web.Response(status=503, text="starting")
        return web.Response(text="status: ready")

    app = web.Application()
    app.router.add_route("*", "/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1], hits
    await runner.cleanup()


def allow_loopback(ctx: ToolContext) -> ToolContext:
    ctx.settings = ctx.settings.model_copy(
        update={"net_http": NetHttpSettings(allowed_private_hosts=["127.0.0.1"])}
    )
    return ctx


async def test_a_url_is_polled_until_it_answers(
    waiter: Callable[..., ToolContext], server: tuple[int, list[str]]
) -> None:
    port, hits = server
    ctx = allow_loopback(waiter(labels=(*FILES, "net.http:egress")))
    url = f"http://127.0.0.1:{port}/health"
    result = await wait(ctx, type="url", url=url, body_contains="ready", poll_interval_ms=1000)
    assert result["status"] == "met" and result["last_status"] == 200 and result["polls"] >= 2
    assert set(hits) == {"GET"}
    head = await wait(ctx, type="url", url=url)
    assert head["status"] == "met" and hits[-1] == "HEAD"


async def test_loopback_is_refused_unless_the_operator_allowed_it(
    waiter: Callable[..., ToolContext], server: tuple[int, list[str]]
) -> None:
    port, hits = server
    with pytest.raises(ToolError, match=r"blocked: 127\.0\.0\.1 is a loopback address"):
        await wait(
            waiter(labels=(*FILES, "net.http:egress")), type="url", url=f"http://127.0.0.1:{port}/health"
        )
    assert hits == []


async def test_a_name_resolving_to_a_private_address_is_refused(
    waiter: Callable[..., ToolContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    looked_up: list[str] = []

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    ctx = waiter(labels=(*FILES, "net.http:egress"))
    with pytest.raises(
        ToolError, match=r"blocked: build\.internal\.test resolves to 10\.1\.2\.3, a private address"
    ):
        await wait(ctx, type="url", url="http://build.internal.test/ready")
    assert looked_up == ["build.internal.test"]


async def test_a_persona_without_network_may_not_poll_urls(waiter: Callable[..., ToolContext]) -> None:
    with pytest.raises(ToolError, match="may not reach the network"):
        await wait(waiter(), type="url", url="https://example.com/")


async def test_url_arguments_are_checked(waiter: Callable[..., ToolContext]) -> None:
    ctx = waiter(labels=(*FILES, "net.http:egress"))
    with pytest.raises(ToolError, match="body_contains needs the body: send method GET"):
        await wait(ctx, type="url", url="https://example.com/", method="HEAD", body_contains="x")
    with pytest.raises(ToolError, match="method must be HEAD or GET"):
        await wait(ctx, type="url", url="https://example.com/", method="POST")
    with pytest.raises(ToolError, match="only http: and https: URLs are allowed"):
        await wait(ctx, type="url", url="file:///etc/passwd")


# ---------------------------------------------------------------- shell


@no_sandbox
async def test_a_background_job_of_this_thread_is_waited_for(
    waiter: Callable[..., ToolContext], make_ctx: Callable[..., ToolContext]
) -> None:
    ctx = waiter()
    job = await run_bash(ctx, {"command": "sleep 0.3; exit 3", "run_in_background": True})
    result = await wait(ctx, type="process", pid=job["pid"], poll_interval_ms=5000)
    assert result["status"] == "met" and result["exit_code"] == 3 and result["job_status"] == "exited"
    assert result["elapsed_ms"] < 5000  # the job's end wakes the wait, not the next poll
    other = make_ctx(thread_id=ctx.thread_id + 1, labels=FILES)
    with pytest.raises(ToolError, match=rf"pid {job['pid']} is not a background job of this thread"):
        await wait(other, type="process", pid=job["pid"])


@no_sandbox
async def test_a_command_is_polled_in_the_sandbox_until_it_exits_0(
    waiter: Callable[..., ToolContext], settings: Settings
) -> None:
    ctx = waiter()
    command = "test -f /workspace/flag || { echo waiting; exit 1; }; cat /workspace/flag"
    missed = await wait(ctx, type="command", command=command, timeout_ms=1500, poll_interval_ms=1000)
    assert missed["status"] == "timed_out" and missed["last_exit_code"] == 1
    assert missed["last_stdout"] == "waiting\n"
    workspace = settings.data_path / "workspaces" / "assistant" / "threads" / str(ctx.thread_id)
    (workspace / "flag").write_text("up\n")
    met = await wait(ctx, type="command", command=command)
    assert met["status"] == "met" and met["last_stdout"] == "up\n"
    escaped = await wait(ctx, type="command", command="test -e /etc/shadow && cat /etc/shadow", timeout_ms=1)
    assert escaped["status"] == "timed_out" and "last_stdout" not in escaped
