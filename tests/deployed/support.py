"""Run Talon as users deploy it: ``talon run`` as a subprocess at the default log level,
each platform and model stand-in in a process of its own.

Fakes are started with ``python -m <module> --port-file PATH ...`` and write a JSON line
(at least ``url``) to that file once listening. Everything binds 127.0.0.1 and every
process is bounded in time (``--max-seconds``) and stopped by the test.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import socket
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import yaml
from psycopg.rows import dict_row

from gateway.live_reply import WRITING
from tests.e2e.daemon import Daemon, talon, talon_env

# What a log must never contain: a failure inside logging itself, or an unhandled error.
LOG_FAILURES = re.compile(r"--- Logging error ---|Traceback \(most recent call last\)|KeyError")


class FakeProcess:
    """A stand-in server in its own process; ``info`` is what it wrote to its port file."""

    def __init__(self, proc: asyncio.subprocess.Process, info: dict[str, Any], log: Path) -> None:
        self.proc = proc
        self.info = info
        self.log = log

    @property
    def url(self) -> str:
        return str(self.info["url"])

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


@asynccontextmanager
async def fake_process(
    module: str, tmp: Path, *args: str, max_seconds: float = 600
) -> AsyncIterator[FakeProcess]:
    name = module.rsplit(".", 2)[-2] if module.endswith("standalone") else module.rsplit(".", 1)[-1]
    port_file = tmp / f"{name}.port"
    log = tmp / f"{name}.log"
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            module,
            "--port-file",
            str(port_file),
            "--max-seconds",
            str(max_seconds),
            *args,
            stdout=out,
            stderr=out,
        )
    fake: FakeProcess | None = None
    try:
        async with asyncio.timeout(20):
            while not port_file.exists():
                if proc.returncode is not None:
                    raise RuntimeError(f"{module} exited {proc.returncode}:\n{log.read_text()}")
                await asyncio.sleep(0.05)
        text = port_file.read_text().strip()
        info = json.loads(text) if text.startswith("{") else {"url": text}
        fake = FakeProcess(proc, info, log)
        yield fake
    finally:
        if fake is None:
            proc.kill()
            await proc.wait()
        else:
            await fake.stop()


def write_deployed_config(
    root: Path, *, model_url: str, channels: list[dict[str, Any]], model_kind: str = "openai", **extra: Any
) -> Path:
    """A bot folder as ``talon init`` would lay it out, every channel bound to ``assistant``
    on the model stand-in. Nothing else is tuned unless ``extra`` says so."""
    config: dict[str, Any] = {
        "data_dir": "data",
        "providers": {"local": {"type": model_kind, "base_url": model_url, "api_key": "none"}},
        "channels": channels,
        "bindings": [{"channel": c["name"], "persona": "assistant"} for c in channels],
        **extra,
    }
    (root / "talon.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    persona = root / "personas" / "assistant"
    persona.mkdir(parents=True, exist_ok=True)
    (persona / "persona.yaml").write_text(yaml.safe_dump({"model": "local:test-model"}), encoding="utf-8")
    (persona / "system.md").write_text("# Assistant\n\nYou are a helpful assistant.\n", encoding="utf-8")
    return root / "talon.yaml"


def telegram_node(root: Path, bot_api: Any, model_url: str, database: dict[str, Any]) -> Path:
    """A bot folder with one Telegram channel on the stand-in ``bot_api``, its store the
    ``database`` settings (one node of several on PostgreSQL)."""
    root.mkdir(parents=True, exist_ok=True)
    return write_deployed_config(
        root,
        model_url=model_url,
        channels=[
            {
                "name": "team-telegram",
                "type": "telegram",
                "token": bot_api.info["token"],
                "api_base_url": bot_api.url,
            }
        ],
        database=database,
    )


@asynccontextmanager
async def deployed_daemon(config: Path, *args: str) -> AsyncIterator[Daemon]:
    """``talon run -c config [args]``, ready when its control socket answers."""
    daemon = Daemon(config, talon_env(), None, *args)
    async with daemon:
        await daemon.start(config.parent / "data", ready_timeout=60)
        yield daemon


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        return await resp.json()


async def post_json(url: str, body: Any) -> Any:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        resp.raise_for_status()
        return await resp.json()


def outbox_rows(data_dir: Path, database_url: str | None = None) -> list[dict[str, Any]]:
    """The outbox as the daemon left it (read-only; the daemon may still be running), from the
    SQLite file in ``data_dir`` or the PostgreSQL database at ``database_url``."""
    if database_url:
        with psycopg.connect(database_url, row_factory=dict_row) as pg:
            return pg.execute("SELECT chat_id, status, text, plain, format, error FROM outbox").fetchall()
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [
            dict(r) for r in conn.execute("SELECT chat_id, status, text, plain, format, error FROM outbox")
        ]
    finally:
        conn.close()


def reported_unknown(rows: list[dict[str, Any]], chat: int | str, text: str) -> bool:
    """Whether the outbox records the reply to ``text`` in ``chat`` as ``unknown`` (in flight at
    a kill: maybe delivered, never resent), which the daemon reports instead of sending."""
    from tests.deployed.test_telegram_burst import answered

    return any(
        r["status"] == "unknown" and str(r["chat_id"]) == str(chat) and answered([str(r["plain"])], text)
        for r in rows
    )


def unfinished_preview(text: str) -> bool:
    """A streamed preview's text: it ends in its writing or status line (never a reply's)."""
    last = text.rsplit("\n", 1)[-1]
    return last == WRITING or last.startswith("⏳ ")


def unaccounted(shown: dict[str, list[str]], rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per chat, what it shows that no outbox row delivered, and what rows delivered that it
    does not show (empty when they agree). A row that drops a preview shows nothing; a row
    that edits one shows its own text in the preview's place."""
    delivered: dict[str, Counter[str]] = {}
    for row in rows:
        if row["format"] != "drop_preview":
            delivered.setdefault(str(row["chat_id"]), Counter())[row["text"]] += 1
    differences = {}
    for chat in set(shown) | set(delivered):
        seen, sent = Counter(shown.get(chat, [])), delivered.get(chat, Counter())
        if seen != sent:
            differences[chat] = {
                "shown, not delivered": dict(seen - sent),
                "delivered, not shown": dict(sent - seen),
            }
    return differences


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server the test configures to bind it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening_tcp(pid: int) -> list[tuple[str, int]]:
    """The TCP sockets process ``pid`` listens on, as (address, port), from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((_proc_address(address), int(port, 16)))
    return sorted(found)


def _proc_address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp* print each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def log_failures(text: str) -> list[str]:
    lines = text.splitlines()
    return [
        "\n".join(lines[max(0, i - 2) : i + 8]) for i, line in enumerate(lines) if LOG_FAILURES.search(line)
    ]


async def wait_for_answers(
    fake_url: str, questions: dict[str, str], answered: Callable[[list[str], str], bool], timeout: float
) -> dict[str, list[str]]:
    """Poll the fake's ``/_fake/sent`` until every chat in ``questions`` has an answer to its
    question; returns everything sent. Fails naming a few chats still waiting."""
    deadline = time.monotonic() + timeout
    while True:
        sent = await get_json(f"{fake_url}/_fake/sent")
        missing = [chat for chat, question in questions.items() if not answered(sent.get(chat, []), question)]
        if not missing:
            return sent
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(missing)} chats never got their last answer, e.g. {missing[:5]}")
        await asyncio.sleep(0.5)


async def inject_rounds(fake_url: str, rounds: list[list[dict[str, Any]]], gap: float) -> None:
    """POST each round of messages to the fake's ``/_fake/inject``, ``gap`` seconds apart."""
    for i, messages in enumerate(rounds):
        if i:
            await asyncio.sleep(gap)
        await post_json(f"{fake_url}/_fake/inject", {"messages": messages})


CONSOLE_PASSWORD = "a long console password"


async def add_console_user(config: Path, name: str, role: str) -> dict[str, str]:
    """``talon users add NAME --role ROLE`` as operators run it; the ``console.users`` entry it prints."""
    code, out, err = await talon(
        "users",
        "add",
        name,
        "--role",
        role,
        "--password-stdin",
        "-c",
        str(config),
        stdin=f"{CONSOLE_PASSWORD}\n".encode(),
    )
    assert code == 0, err
    entry = yaml.safe_load(out.split("\n", 1)[1])
    return entry[0]


async def sign_in(page: Any, url: str, name: str) -> None:
    """Fill the console's sign-in form (a Playwright page on it) and wait to land on ``url``."""
    await page.fill("input[name=name]", name)
    await page.fill("input[name=password]", CONSOLE_PASSWORD)
    await page.click("button[type=submit]")
    await page.wait_for_url(url)
