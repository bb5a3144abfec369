"""The per-turn cost of sender roles and spending budgets, in process.

Before its first model call a turn narrows the persona's labels by its senders' role
(``batch_role`` + ``as_role``) and, with budgets configured, asks :meth:`Spending.check`:
one read of three indexed sums (the sender's day, the persona's month, the channel's day)
over ``runs``, now key lookups in the usage rollups. The database holds ``--runs`` completed runs spread over 30 days, 200
senders, 4 personas and 3 channels, so the sums cover a realistic month.

python -m bench.bench_spending [--runs 100000] [--checks 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from connectors.base import ThreadKey
from gateway.config import Settings
from gateway.personas import Persona
from gateway.roles import as_role, batch_role
from gateway.spending import Spending
from gateway.store.db import open_database
from gateway.store.runs import RunSpend, complete_run, start_run
from gateway.store.threads import upsert_thread
from gateway.usage import Periods

SETTINGS = {
    "channels": [
        {"name": "tg", "type": "telegram", "token": "1:x", "roles": {"owner": ["u0"], "guest": ["u1", "u2"]}}
    ],
    "budgets": {
        "per_user_day": {"tokens": 200_000},
        "per_persona_month": {"cost": 500.0},
        "per_channel_day": {"tokens": 50_000_000},
    },
}


def _fill(conn: sqlite3.Connection, runs: int, now: float) -> None:
    rng = random.Random(7)
    threads = [
        upsert_thread(conn, ThreadKey(ch, f"chat{i}"), chat_type="group", persona="p0", now=now).id
        for ch in ("tg", "slack", "discord")
        for i in range(20)
    ]
    for _ in range(runs):
        started = now - rng.random() * 30 * 86_400
        run = start_run(conn, rng.choice(threads), f"p{rng.randrange(4)}", "a:m", started)
        spend = RunSpend(
            cost=rng.random() / 100,
            currency="USD",
            sender_id=f"u{rng.randrange(200)}",
            channel=rng.choice(("tg", "slack", "discord")),
            persona=f"p{rng.randrange(4)}",
            periods=Periods.at(started, "UTC").names,
        )
        complete_run(
            conn,
            run,
            model="a:m",
            input_tokens=3000,
            output_tokens=300,
            model_calls=2,
            now=started,
            spend=spend,
        )


async def main(runs: int, checks: int) -> None:
    settings = Settings.model_validate(SETTINGS)
    persona = Persona(
        name="p0",
        provider="a",
        model="m",
        description=None,
        capabilities=("shell.exec:sandbox", "fs.read:persona", "memory.access:persona", "git.read"),
        system_prompt="",
        path=Path("."),
        role_capabilities={"guest": ("memory.access:thread",), "member": ("fs.read:thread", "git.read")},
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = await open_database(Path(tmp) / "talon.db")
        try:
            now = time.time()
            await db.run_transaction(_fill, runs, now)
            spending = Spending(db, settings)
            roles, budgets = [], []
            for i in range(checks):
                senders = [f"u{i % 200}"]
                started = time.perf_counter()
                as_role(persona, batch_role(settings, "tg", senders))
                roles.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await spending.check("p0", "tg", senders)
                budgets.append((time.perf_counter() - started) * 1000)
        finally:
            await db.close()

    def show(name: str, samples: list[float]) -> None:
        samples.sort()
        p99 = samples[int(len(samples) * 0.99) - 1]
        print(f"{name}: p50 {statistics.median(samples):.3f} ms, p99 {p99:.3f} ms over {len(samples)}")

    print(f"{runs:,} runs in the database")
    show("role narrowing (batch_role + as_role)", roles)
    show("budget check (3 budgets)", budgets)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--checks", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.checks))
