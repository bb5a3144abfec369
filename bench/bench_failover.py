"""Standby takeover on PostgreSQL: how long a Telegram chat goes unanswered when the active
node dies.

Two ``talon run`` nodes (the second ``database.standby: true``) on a throwaway PostgreSQL server
(tests/pg_server.py), one Telegram bot served by the fake Bot API in its own process, the
model stand-in in another. Each round: the active node answers a message; it is killed with
kill -9 and a message is sent at once; the figure is the time from the kill to that message's
answer, as the user sees it, and the standby's own "free after" time from its log. The killed
node then starts again as the standby for the next round.

    python -m bench.bench_failover [--rounds 3] [--poll 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.deployed.support import fake_process, write_deployed_config
from tests.e2e.daemon import Daemon, talon_env
from tests.pg_server import running_server


def _node(root: Path, bot_api: Any, model_url: str, poll: float) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    channel = {"name": "tg", "type": "telegram", "token": bot_api.info["token"], "api_base_url": bot_api.url}
    return write_deployed_config(
        root,
        model_url=model_url,
        channels=[channel],
        log_level="warning",
        database={"url": "${TALON_DATABASE_URL}", "standby": True, "standby_poll": poll},
    )


async def _say(session: aiohttp.ClientSession, bot_api: str, text: str) -> None:
    body = {"messages": [{"chat_id": 7, "user_id": 7, "text": text}]}
    async with session.post(f"{bot_api}/_fake/inject", json=body) as resp:
        resp.raise_for_status()


async def _answered(session: aiohttp.ClientSession, bot_api: str, text: str, timeout: float = 120) -> None:
    async with asyncio.timeout(timeout):
        while True:
            async with session.get(f"{bot_api}/_fake/sent") as resp:
                sent = await resp.json()
            if any(t == f"echo: {text}" for t in sent.get("7", [])):
                return
            await asyncio.sleep(0.02)


async def run(rounds: int, poll: float) -> list[float]:
    took: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        if server is None:
            raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
        root = Path(tmp)
        env = talon_env({"TALON_DATABASE_URL": server.new_database()})
        async with (
            fake_process("tests.fakes.telegram_api.standalone", root) as bot_api,
            fake_process("tests.fakes.model_api", root, "--kind", "openai") as model,
            aiohttp.ClientSession() as session,
        ):
            nodes = [Daemon(_node(root / name, bot_api, model.url, poll), env) for name in ("a", "b")]
            await nodes[0].start(root / "a" / "data", ready_timeout=60)
            standby = asyncio.create_task(nodes[1].start(root / "b" / "data", ready_timeout=600))
            for n in range(rounds):
                active = n % 2
                await _say(session, bot_api.url, f"before {n}")
                await _answered(session, bot_api.url, f"before {n}")
                await asyncio.sleep(1.0)  # the standby is waiting by now
                assert nodes[active].proc is not None
                nodes[active].proc.kill()
                killed = time.monotonic()
                await _say(session, bot_api.url, f"after {n}")
                await _answered(session, bot_api.url, f"after {n}")
                took.append(time.monotonic() - killed)
                print(f"round {n + 1}: answered {took[-1]:.2f} s after the kill", flush=True)
                await nodes[active].proc.wait()
                await standby
                data = root / ("a" if active == 0 else "b") / "data"
                standby = asyncio.create_task(nodes[active].start(data, ready_timeout=600))
            standby.cancel()
            for node in nodes:
                if node.proc and node.proc.returncode is None:
                    node.proc.kill()
                    await node.proc.wait()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--poll", type=float, default=1.0, help="the standby's standby_poll")
    args = ap.parse_args()
    took = asyncio.run(run(args.rounds, args.poll))
    print(f"kill -9 to the next answer: median {statistics.median(took):.2f} s, max {max(took):.2f} s")


if __name__ == "__main__":
    main()
