"""Several nodes on one PostgreSQL database: how fast 1, 2 and 3 nodes answer a burst, their
write conflicts, and how long Telegram goes unread when the node holding the poller dies.

Every node is a ``talon run`` process in cluster mode (``database.cluster: true``) on a
throwaway PostgreSQL server (tests/pg_server.py), all on this machine, with one Telegram bot
served by the fake Bot API in its own process and the model stand-in in another. A run: the
nodes start on a fresh database, a burst of ``--chats`` x ``--per-chat`` messages is injected
at once, and the figures are replies/s and messages answered/s until every chat's last message
is answered. Messages that arrive while their chat's turn runs are answered together by its next
turn, so with several messages per chat the count of replies (turns) depends on how soon turns
start; with ``--per-chat 1`` every message is a turn of its own. Each node's
``talon_write_conflicts`` counter is read from its /metrics. Every reply is checked: a chat
answered twice is reported.

Failover: with three nodes, the node holding the poller is killed with kill -9 and a message is
sent at that moment; the figure is the time from the kill to its answer, at the default
``failover_seconds``.

    python -m bench.bench_cluster [--order 1,2,3,3,2,1] [--chats 200] [--per-chat 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from tests.deployed.support import fake_process, get_json, post_json, write_deployed_config
from tests.deployed.test_telegram_burst import _burst, answered
from tests.e2e.daemon import Daemon, talon_env
from tests.pg_server import running_server

TOKEN = "bench-metrics-token-0123456789"
POLLER = "channel:tg"


def _node(root: Path, name: str, bot_api: Any, model_url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    channel = {
        "name": "tg",
        "type": "telegram",
        "token": bot_api.info["token"],
        "api_base_url": bot_api.url,
        # The fake Bot API enforces no limits; the platform's rate is not what is measured.
        "pacing": {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0},
    }
    return write_deployed_config(
        root,
        model_url=model_url,
        channels=[channel],
        log_level="warning",
        http={"listen": "127.0.0.1:0", "metrics_token": TOKEN},
        database={"url": "${TALON_DATABASE_URL}", "cluster": True, "node_id": name},
    )


async def _conflicts(session: aiohttp.ClientSession, data: Path) -> float:
    url = (data / "http.url").read_text().strip()
    async with session.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
        text = await resp.text()
    found = re.search(r"^talon_write_conflicts_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def _start(
    names: list[str], root: Path, bot_api: Any, model_url: str, env: dict[str, str]
) -> list[Daemon]:
    nodes = [Daemon(_node(root / name, name, bot_api, model_url), env) for name in names]
    await nodes[0].start(root / names[0] / "data", ready_timeout=60)  # it migrates
    await asyncio.gather(
        *(
            n.start(root / name / "data", ready_timeout=60)
            for n, name in zip(nodes[1:], names[1:], strict=True)
        )
    )
    return nodes


async def _stop(nodes: list[Daemon]) -> None:
    for node in nodes:
        if node.proc is not None and node.proc.returncode is None:
            node.proc.kill()
            await node.proc.wait()


async def throughput(server: Any, n: int, chats: int, per_chat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = talon_env({"TALON_DATABASE_URL": server.new_database()})
        names = [f"n{i + 1}" for i in range(n)]
        async with (
            fake_process("tests.fakes.telegram_api.standalone", root) as bot_api,
            fake_process("tests.fakes.model_api", root, "--kind", "openai") as model,
            aiohttp.ClientSession() as session,
        ):
            nodes = await _start(names, root, bot_api, model.url, env)
            try:
                await asyncio.sleep(2.0)  # the others have seen the first node hold the poller
                before = [await _conflicts(session, root / name / "data") for name in names]
                started = time.monotonic()
                await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(chats, per_chat)})
                last = f"message {per_chat - 1}"
                while True:
                    sent = await get_json(f"{bot_api.url}/_fake/sent")
                    if all(answered(sent.get(str(1000 + c), []), f"chat {c} {last}") for c in range(chats)):
                        break
                    if time.monotonic() - started > 600:
                        raise SystemExit(f"{n} nodes: not every chat answered in 600 s")
                    await asyncio.sleep(0.05)
                took = time.monotonic() - started
                after = [await _conflicts(session, root / name / "data") for name in names]
            finally:
                await _stop(nodes)
            replies = sum(len(texts) for texts in sent.values())
            doubled = sum(n - 1 for texts in sent.values() for n in Counter(texts).values() if n > 1)
    return {
        "nodes": n,
        "seconds": took,
        "replies": replies,
        "replies_per_s": replies / took,
        "messages_per_s": chats * per_chat / took,
        "conflicts_per_s": (sum(after) - sum(before)) / took,
        "doubled": doubled,
    }


async def failover(server: Any, rounds: int) -> list[float]:
    took: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = talon_env({"TALON_DATABASE_URL": server.new_database()})
        names = ["n1", "n2", "n3"]
        async with (
            fake_process("tests.fakes.telegram_api.standalone", root) as bot_api,
            fake_process("tests.fakes.model_api", root, "--kind", "openai") as model,
        ):
            nodes = await _start(names, root, bot_api, model.url, env)
            try:
                for n in range(rounds):
                    await post_json(f"{bot_api.url}/_fake/inject", {"messages": [_say(f"before {n}")]})
                    await _answer(bot_api.url, f"before {n}")
                    holder = await _poller_holder(nodes, names, root, env)
                    victim = nodes[holder]
                    assert victim.proc is not None
                    victim.proc.kill()
                    killed = time.monotonic()
                    await post_json(f"{bot_api.url}/_fake/inject", {"messages": [_say(f"after {n}")]})
                    await _answer(bot_api.url, f"after {n}")
                    took.append(time.monotonic() - killed)
                    print(f"failover round {n + 1}: answered {took[-1]:.2f} s after the kill", flush=True)
                    await victim.proc.wait()
                    # The killed node comes back and waits for the poller.
                    await victim.start(root / names[holder] / "data", ready_timeout=60)
                    nodes[holder] = victim
                    await asyncio.sleep(1.0)
            finally:
                await _stop(nodes)
    return took


async def _poller_holder(nodes: list[Daemon], names: list[str], root: Path, env: dict[str, str]) -> int:
    """Which node holds the poller, as ``talon status`` on it says."""
    from tests.e2e.daemon import talon

    for i, name in enumerate(names):
        _, out, _ = await talon("status", "--config", str(root / name / "talon.yaml"), env=env)
        if re.search(rf"holding [^\n]*{re.escape(POLLER)}", out):
            return i
    raise SystemExit(f"no node holds {POLLER}")


def _say(text: str) -> dict[str, Any]:
    return {"chat_id": 7, "user_id": 7, "text": text}


async def _answer(bot_api: str, text: str) -> None:
    async with asyncio.timeout(120):
        while not answered((await get_json(f"{bot_api}/_fake/sent")).get("7", []), text):
            await asyncio.sleep(0.02)


async def run(order: list[int], chats: int, per_chat: int, rounds: int) -> None:
    with running_server() as server:
        if server is None:
            raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
        results: dict[int, list[dict[str, Any]]] = {}
        for n in order:
            result = await throughput(server, n, chats, per_chat)
            results.setdefault(n, []).append(result)
            print(
                f"{n} node(s): {chats * per_chat} messages answered in {result['seconds']:.1f} s = "
                f"{result['messages_per_s']:.1f} messages/s ({result['replies']} replies), "
                f"{result['conflicts_per_s']:.2f} write conflicts/s, {result['doubled']} doubled; "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        for n, runs in sorted(results.items()):
            replies = [r["replies_per_s"] for r in runs]
            messages = [r["messages_per_s"] for r in runs]
            print(
                f"{n} node(s): {min(replies):.1f}-{max(replies):.1f} replies/s, "
                f"{min(messages):.1f}-{max(messages):.1f} messages answered/s",
                flush=True,
            )
        if rounds:
            took = await failover(server, rounds)
            print(
                f"poller failover, kill -9 to the next answer: median {statistics.median(took):.2f} s, "
                f"max {max(took):.2f} s"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--order", default="1,2,3,3,2,1", help="node counts, one run each, in this order")
    ap.add_argument("--chats", type=int, default=200)
    ap.add_argument("--per-chat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="poller failover rounds (0: none)")
    args = ap.parse_args()
    asyncio.run(run([int(n) for n in args.order.split(",")], args.chats, args.per_chat, args.rounds))


if __name__ == "__main__":
    main()
