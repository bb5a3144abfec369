"""kill -9 in the middle of a burst: after a restart every message has exactly one reply."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections import Counter
from pathlib import Path

from gateway.control_client import ControlClient
from tests.e2e.daemon import Daemon
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, write_config

THREADS = 20
PER_THREAD = 4


def _replies(db_path: Path) -> tuple[list[str], list[str], int]:
    """(user messages, assistant replies, open work items) as stored."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
        users = [r[0] for r in db.execute("SELECT text FROM messages WHERE role = 'user'")]
        sent = [
            r[0]
            for r in db.execute(
                "SELECT o.text FROM outbox o WHERE o.run_id IS NOT NULL AND o.status = 'sent' ORDER BY o.id"
            )
        ]
        open_items = db.execute(
            "SELECT (SELECT COUNT(*) FROM queue_items WHERE status IN ('pending', 'leased')) + "
            "(SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'sending'))"
        ).fetchone()[0]
    return users, sent, open_items


async def test_kill_9_mid_burst_loses_and_doubles_nothing(tmp_path: Path) -> None:
    responder = lambda body: Reply(text=f"echo: {last_user_text(body)}", delay=0.05)  # noqa: E731
    async with FakeAnthropic(responder=responder) as fake:
        config = write_config(tmp_path, provider=provider_for(fake), extra={"queue": {"workers": 8}})
        data = tmp_path / "data"
        async with Daemon(config) as daemon:
            await daemon.start(data)
            sent: list[str] = []
            async with ControlClient(data) as client:
                for n in range(PER_THREAD):
                    for t in range(THREADS):
                        text = f"m{t}-{n}"
                        reply = await client.call(
                            {
                                "op": "chat",
                                "thread": f"t{t}",
                                "text": text,
                                "wait": False,
                                "event_id": uuid.uuid4().hex,
                            }
                        )
                        assert reply["status"] == "accepted"
                        sent.append(text)
            # Let some turns finish and some be in flight, then pull the plug.
            for _ in range(200):
                if len(_replies(data / "talon.db")[1]) >= 10:
                    break
                await asyncio.sleep(0.02)
            await daemon.kill()
            _, _, open_at_kill = _replies(data / "talon.db")

            await daemon.start(data)
            for _ in range(500):
                users, replies, open_items = _replies(data / "talon.db")
                if open_items == 0:
                    break
                await asyncio.sleep(0.05)
            await daemon.stop()

    assert open_at_kill > 0, "the kill should land mid-burst"
    assert sorted(users) == sorted(sent)
    answered = Counter(part for r in replies for part in r.removeprefix("echo: ").split("\n\n"))
    assert answered == Counter(sent), "every message answered exactly once"
