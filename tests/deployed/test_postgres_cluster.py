"""A cluster as deployed: three ``talon run`` nodes with one Telegram bot on one PostgreSQL
database, the stand-ins slow and sometimes failing. A burst over many chats is answered by
the nodes together; the first node, which polls Telegram and leads the scheduler, is killed
with kill -9 mid-burst. Polling moves to another node within ``failover_seconds``, a schedule
due after the kill fires once on the new leader, and every chat is answered, nothing twice,
nothing left in the outbox."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from connectors.base import ThreadKey
from gateway.store.engines import open_store
from gateway.store.schedules import create_schedule
from gateway.store.threads import upsert_thread
from tests.deployed.support import (
    fake_process,
    get_json,
    log_failures,
    outbox_rows,
    post_json,
    reported_unknown,
    telegram_node,
    unfinished_preview,
)
from tests.deployed.test_telegram_burst import _burst, answered
from tests.e2e.daemon import Daemon, talon, talon_env

pytestmark = pytest.mark.timeout(480)

CHATS = 150
PER_CHAT = 3
FAILOVER = 15.0  # the default: a heartbeat late under a loaded CI machine does not move work
POLLER_ROLE = "channel:team-telegram"
SCHEDULE_CHAT = 1000  # a chat of the burst: the stand-in knows only chats that wrote to the bot


def _node(root: Path, name: str, bot_api: Any, model_url: str) -> Path:
    database = {
        "url": "${TALON_DATABASE_URL}",
        "cluster": True,
        "node_id": name,
        "failover_seconds": FAILOVER,
    }
    return telegram_node(root, bot_api, model_url, database)


async def _one_shot(url: str, scratch: Path, chat: int, prompt: str, delay: float) -> None:
    """A one-shot schedule of the persona answering into ``chat``, due in ``delay`` seconds,
    written straight into the store as create_schedule would."""
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    db = await open_store(url, scratch, migrate=False)
    at = time.time() + delay

    def write(conn: Any) -> None:
        thread = upsert_thread(
            conn,
            ThreadKey("team-telegram", str(chat)),
            chat_type="private",
            persona="assistant",
            now=time.time(),
        )
        create_schedule(
            conn,
            persona="assistant",
            thread_id=thread.id,
            label=prompt,
            cron_expr=None,
            run_at=at,
            timezone="UTC",
            prompt=prompt,
            prompt_file=None,
            next_run_at=at,
            now=time.time(),
        )

    try:
        await db.run_transaction(write)
    finally:
        await db.close()


def _replies(sent: dict[str, list[str]], chat: int, prompt: str) -> int:
    return sum(1 for text in sent.get(str(chat), []) if prompt in text)


def _claims(url: str) -> list[Any]:
    with psycopg.connect(url) as pg:
        return pg.execute(
            "SELECT thread_id, node_id, expires_at - extract(epoch FROM now()) FROM outbox_claims"
        ).fetchall()


def _scheduler_lines(log: str) -> str:
    return "\n".join(line for line in log.splitlines() if "schedul" in line)


def _runs_by_node(url: str) -> Counter[str]:
    with psycopg.connect(url) as pg:
        rows = pg.execute("SELECT node_id, count(*) FROM runs GROUP BY node_id").fetchall()
    return Counter({str(node): int(n) for node, n in rows})


async def test_three_nodes_share_a_burst_and_the_poller_moves_after_kill_9(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.new_database()
    env = talon_env({"TALON_DATABASE_URL": url})
    names = ("n1", "n2", "n3")
    async with (
        fake_process(
            "tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.05:0.2", "--fail-rate", "0.02"
        ) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--delay", "0.1") as model,
    ):
        configs = {name: _node(tmp_path / name, name, bot_api, model.url) for name in names}
        nodes = {name: Daemon(configs[name], env) for name in names}
        async with nodes["n1"], nodes["n2"], nodes["n3"]:
            await nodes["n1"].start(tmp_path / "n1" / "data", ready_timeout=60)  # it migrates
            await asyncio.gather(
                *(nodes[n].start(tmp_path / n / "data", ready_timeout=60) for n in names[1:])
            )
            # The first node holds the poller; the others wait for it.
            async with asyncio.timeout(30):
                while not all(f"{POLLER_ROLE} runs on another node" in nodes[n].log() for n in names[1:]):
                    await asyncio.sleep(0.1)
            _, status, problems = await talon("status", "--config", str(configs["n2"]), env=env)
            assert "cluster: 3 nodes; this is n2" in status, status + problems
            assert status.count(": alive,") == 3, status

            await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(CHATS, PER_CHAT)})
            await _one_shot(url, tmp_path / "scratch", SCHEDULE_CHAT, "before the kill", 1.0)
            async with asyncio.timeout(120):
                while sum(map(len, (await get_json(f"{bot_api.url}/_fake/sent")).values())) < 60:
                    await asyncio.sleep(0.05)
            await _one_shot(url, tmp_path / "scratch", SCHEDULE_CHAT, "after the kill", 4.0)
            await nodes["n1"].kill()
            killed_at = time.monotonic()
            async with asyncio.timeout(FAILOVER + 20):
                while not any(f"{POLLER_ROLE}: taken over by this node" in nodes[n].log() for n in names[1:]):
                    await asyncio.sleep(0.1)
            took_over = time.monotonic() - killed_at

            deadline = time.monotonic() + 300
            while True:
                rows = outbox_rows(tmp_path / "n2" / "data", url)
                sent = await get_json(f"{bot_api.url}/_fake/sent")
                last = f"message {PER_CHAT - 1}"
                waiting = [
                    c
                    for c in range(CHATS)
                    if not answered(sent.get(str(1000 + c), []), f"chat {c} {last}")
                    and not reported_unknown(rows, 1000 + c, f"chat {c} {last}")
                ]
                pending = [r for r in rows if r["status"] in ("pending", "sending")]  # with their chats
                fired = _replies(sent, SCHEDULE_CHAT, "after the kill")
                if not waiting and not pending and fired:
                    break
                assert time.monotonic() < deadline, (
                    f"{len(waiting)} chats unanswered, {len(pending)} rows open, schedule fired {fired} times; "
                    + "\n".join(_scheduler_lines(nodes[n].log()) for n in names)
                    + f"\nopen rows: {pending}\nclaims: {_claims(url)}"
                )
                await asyncio.sleep(0.5)
            _, after, _ = await talon("status", "--config", str(configs["n2"]), env=env)
            for name in names[1:]:
                assert await nodes[name].stop() == 0
        messages = await get_json(f"{bot_api.url}/_fake/messages")
        shown = {chat: [m["text"] for m in ms if not m["deleted"]] for chat, ms in messages.items()}

    assert took_over < FAILOVER + 10, took_over
    # Each schedule ran once: the second on the node that took the scheduler over.
    assert [_replies(shown, SCHEDULE_CHAT, p) for p in ("before the kill", "after the kill")] == [1, 1], (
        shown.get(str(SCHEDULE_CHAT))
    )
    assert any("scheduler: taken over by this node" in nodes[n].log() for n in names[1:])
    assert re.search(r"took over from lost node\(s\) n1", nodes["n2"].log() + nodes["n3"].log())
    assert "cluster: 2 nodes" in after and "node n1" not in after, after
    # Active/active: the burst's turns ran on more than one node.
    by_node = _runs_by_node(url)
    assert sum(1 for n in names if by_node[n] > 0) >= 2, by_node
    rows = outbox_rows(tmp_path / "n2" / "data", url)
    by_status = Counter(r["status"] for r in rows)
    assert set(by_status) <= {"sent", "unknown"}, by_status
    delivered = Counter(
        (chat, text) for chat, texts in shown.items() for text in texts if not unfinished_preview(text)
    )
    doubled = [key for key, n in delivered.items() if n > 1]
    assert not doubled, f"sent twice: {doubled[:5]}"
    showing = sum(1 for r in rows if r["status"] == "sent" and r["format"] != "drop_preview")
    assert showing <= sum(delivered.values()) <= showing + by_status["unknown"]
    for name in names[1:]:
        assert log_failures(nodes[name].log()) == [], name
