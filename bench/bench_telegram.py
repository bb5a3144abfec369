"""Telegram as users deploy it: ``talon run`` against a bare python-telegram-bot echo bot.

Each side runs in its own process against the same fake Bot API process (long polling),
one after the other in one run; Talon's model is an OpenAI-compatible stand-in process
that answers at once. A burst of messages over many private chats is injected at once.
Reported for both: the drain rate (messages until every chat's last message is answered,
per second) and the bot process's CPU seconds per answered message, and the ratios.

Talon runs its whole path: policy, the pipeline commit before the offset moves, queue,
turn with a streamed model call, renderer, outbox with its ``sending`` mark, typing
indicators. Messages that arrive while a chat is busy are answered together in one turn,
so Talon sends fewer replies than the echo bot. The fake enforces no rate limits, so the
comparison runs Talon with its outbound pacing off (``--pacing`` keeps Telegram's
published limits: 30 messages/s per bot, then the burst drains at that rate).

    python -m bench.bench_telegram [--chats 200] [--per-chat 10] [--pacing]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.deployed.support import FakeProcess, fake_process, write_deployed_config
from tests.e2e.daemon import Daemon, talon_env

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a running process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def _get(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        return await resp.json()


async def _inject(session: aiohttp.ClientSession, api: str, chats: int, per_chat: int) -> None:
    messages = [
        {"chat_id": 1000 + c, "user_id": 1000 + c, "text": f"c{c} m{n}"}
        for n in range(per_chat)
        for c in range(chats)
    ]
    async with session.post(f"{api}/_fake/inject", json={"messages": messages}) as resp:
        resp.raise_for_status()


async def _drained(session: aiohttp.ClientSession, api: str, chats: int, per_chat: int, echo: bool) -> None:
    """Every chat's last message answered (the echo bot: every message echoed)."""
    last = per_chat - 1
    async with asyncio.timeout(600):
        while True:
            sent = await _get(session, f"{api}/_fake/sent")
            if all(_answered(sent.get(str(1000 + c), []), f"c{c} m{last}", echo) for c in range(chats)):
                return
            await asyncio.sleep(0.02)


def _answered(texts: list[str], question: str, echo: bool) -> bool:
    if echo:
        return question in texts
    return any(question in t.removeprefix("echo: ").split("\n") for t in texts)


async def _measure(pid: int, api: FakeProcess, chats: int, per_chat: int, echo: bool) -> tuple[float, float]:
    async with aiohttp.ClientSession() as session:
        cpu_before, fake_before = cpu_seconds(pid), cpu_seconds(api.proc.pid)
        started = time.perf_counter()
        await _inject(session, api.url, chats, per_chat)
        await _drained(session, api.url, chats, per_chat, echo)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu_before
        fake_busy = (cpu_seconds(api.proc.pid) - fake_before) / elapsed
    total = chats * per_chat
    calls = (await _get(session_stats := aiohttp.ClientSession(), f"{api.url}/_fake/stats"))["calls"]
    await session_stats.close()
    print(
        f"  ({'echo bot' if echo else 'talon'}: the fake Bot API was busy {fake_busy:.0%} of the time, "
        f"{calls.get('sendmessage', 0)} sendMessage and {calls.get('sendchataction', 0)} sendChatAction calls)"
    )
    return total / elapsed, cpu / total


async def echo_bot(tmp: Path, chats: int, per_chat: int) -> tuple[float, float]:
    async with fake_process("tests.fakes.telegram_api.standalone", tmp) as api:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.echo_bot",
            "--api",
            api.url,
            "--token",
            api.info["token"],
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            await asyncio.wait_for(proc.stdout.readline(), 30)
            await asyncio.sleep(1.0)  # let its first long poll settle
            return await _measure(proc.pid, api, chats, per_chat, echo=True)
        finally:
            proc.terminate()
            await proc.wait()


async def talon(tmp: Path, chats: int, per_chat: int, pacing: bool) -> tuple[float, float]:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp) as api,
        fake_process("tests.fakes.model_api", tmp, "--kind", "openai") as model,
    ):
        channel: dict[str, Any] = {
            "name": "team-telegram",
            "type": "telegram",
            "token": api.info["token"],
            "api_base_url": api.url,
        }
        if not pacing:
            channel["pacing"] = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}
        config = write_deployed_config(tmp, model_url=model.url, channels=[channel])
        daemon = Daemon(config, talon_env())
        async with daemon:
            await daemon.start(tmp / "data", ready_timeout=60)
            await asyncio.sleep(3.0)  # `talon run` warms its model SDK after it is ready
            assert daemon.proc is not None
            result = await _measure(daemon.proc.pid, api, chats, per_chat, echo=False)
            await daemon.stop()
    return result


async def run(chats: int, per_chat: int, pacing: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        bare_rate, bare_cpu = await echo_bot(Path(a), chats, per_chat)
        ours_rate, ours_cpu = await talon(Path(b), chats, per_chat, pacing)
    print(f"telegram, as deployed: {chats} chats x {per_chat} messages, one burst, fake Bot API process")
    print(f"  bare PTB echo bot: {bare_rate:7,.0f} messages/s  {bare_cpu * 1000:5.2f} ms CPU per message")
    print(
        f"  talon run{' (paced)' if pacing else '':9}: {ours_rate:7,.0f} messages/s  "
        f"{ours_cpu * 1000:5.2f} ms CPU per message"
    )
    print(f"  drain rate ratio:  {ours_rate / bare_rate:.2f}x   CPU ratio: {ours_cpu / bare_cpu:.2f}x")
    return {"bare_rate": bare_rate, "bare_cpu": bare_cpu, "rate": ours_rate, "cpu": ours_cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=200)
    ap.add_argument("--per-chat", type=int, default=10)
    ap.add_argument("--pacing", action="store_true", help="keep Telegram's published limits")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()
    figures = asyncio.run(run(args.chats, args.per_chat, args.pacing))
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
