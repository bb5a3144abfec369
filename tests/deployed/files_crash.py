"""kill -9 while files are being uploaded, for any platform whose stand-in lists the files
that reached its chats at ``GET /_fake/files`` (``[{"chat_id", "name", "sha256"}, ...]``).

The persona asks the model stand-in (``--attach-channel``) for ``attach PATH ...`` in each
chat, so every turn sends that chat's files with one ``channel_send``. The daemon is
killed once every turn has committed and a file has reached its chat before the daemon
heard so (the stand-in answers a while after the file arrived): the moment a blind resend
would double it. Then it is restarted to drain the outbox. :func:`check_exactly_once`
asserts what a user would notice: no file twice, none lost unless it was on the wire at
the kill, and those reported ``unknown``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.deployed.support import deployed_daemon, get_json, log_failures, outbox_rows

DRAIN_SECONDS = 60


@dataclass(frozen=True)
class Outcome:
    at_kill: list[dict[str, Any]]  # the file rows as the kill left them
    uploaded_at_kill: list[dict[str, Any]]  # what had reached the chats then
    rows: list[dict[str, Any]]  # the file rows once the restarted daemon drained the outbox
    uploaded: list[dict[str, Any]]  # what the stand-in says reached its chats
    second_log: str  # the restarted daemon's log


def make_files(data_dir: Path, chats: int, per_chat: int) -> dict[str, str]:
    """Distinct files of 20-20+10*per_chat KB in the persona's /shared; returns name -> sha256."""
    shared = data_dir / "workspaces" / "assistant" / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    digests = {}
    for c in range(chats):
        for n in range(per_chat):
            name = f"c{c}-f{n}.bin"
            data = os.urandom(20_000 + 10_000 * n)
            (shared / name).write_bytes(data)
            digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def attach_request(c: int, per_chat: int) -> str:
    """What the user of chat ``c`` writes: the model answers it by sending those files."""
    return "attach " + " ".join(f"/shared/c{c}-f{n}.bin" for n in range(per_chat))


def allow_sending_files(root: Path) -> None:
    persona = root / "personas" / "assistant" / "persona.yaml"
    persona.write_text(
        yaml.safe_dump({"model": "local:test-model", "capabilities": ["channel.send:*", "fs.read:persona"]})
    )


def file_rows(data_dir: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT chat_id, status, file_name FROM outbox WHERE format = 'file'").fetchall()
        return [dict(r) for r in rows]
    finally:
        conn.close()


async def kill_mid_upload(
    config: Path, fake_url: str, chats: int, inject: Callable[[], Awaitable[Any]]
) -> Outcome:
    """Run the daemon, ``inject`` the requests, kill -9 it mid-upload, restart it and let
    the outbox drain."""
    data_dir = config.parent / "data"
    async with deployed_daemon(config) as daemon:
        await inject()
        async with asyncio.timeout(40):
            # Every turn committed (its reply row exists, so no turn runs again after the
            # kill), some files delivered, and one arrived whose row is not yet sent.
            while True:
                replies = [r for r in outbox_rows(data_dir) if r["plain"] == "sent"]
                uploaded = await get_json(f"{fake_url}/_fake/files")
                rows = file_rows(data_dir)
                delivered = any(r["status"] == "sent" for r in rows)
                if len(replies) == chats and delivered and unrecorded(rows, uploaded):
                    break
                await asyncio.sleep(0.02)
        await daemon.kill()
    at_kill = file_rows(data_dir)
    uploaded_at_kill = await get_json(f"{fake_url}/_fake/files")

    async with deployed_daemon(config) as daemon:
        deadline = time.monotonic() + DRAIN_SECONDS
        while any(r["status"] in ("pending", "sending") for r in outbox_rows(data_dir)):
            assert time.monotonic() < deadline, "the outbox never drained after the restart"
            await asyncio.sleep(0.3)
        assert await daemon.stop() == 0
        second_log = daemon.log()
    uploaded = await get_json(f"{fake_url}/_fake/files")
    return Outcome(at_kill, uploaded_at_kill, file_rows(data_dir), uploaded, second_log)


def unrecorded(rows: list[dict[str, Any]], uploaded: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Files that reached their chat while their row was not yet ``sent``."""
    sent = {(str(r["chat_id"]), r["file_name"]) for r in rows if r["status"] == "sent"}
    return {(str(f["chat_id"]), f["name"]) for f in uploaded} - sent


def check_exactly_once(
    outcome: Outcome, digests: dict[str, str], chat_ids: list[str], data_dir: Path
) -> None:
    """Each file reached its own chat at most once with its bytes; it is missing only if it
    was on the wire at the kill, and exactly those are ``unknown``."""
    rows, uploaded = outcome.rows, outcome.uploaded
    arrived = Counter((str(f["chat_id"]), f["name"]) for f in uploaded)
    assert [key for key, n in arrived.items() if n > 1] == [], "no file reaches a chat twice"
    for f in uploaded:
        assert f["sha256"] == digests[f["name"]], f"{f['name']} arrived with other bytes"
        assert f["name"].startswith(f"c{chat_ids.index(str(f['chat_id']))}-"), (
            "each file went to its own chat"
        )

    assert len(rows) == len(digests), "one outbox row per file"
    assert len(outcome.at_kill) == len(rows), "every file was committed before the kill"
    assert any(r["status"] == "sent" for r in outcome.at_kill), "some files were delivered before the kill"
    caught = unrecorded(outcome.at_kill, outcome.uploaded_at_kill)
    assert caught, "the kill caught a file that had reached its chat before the daemon heard so"
    in_flight = {(str(r["chat_id"]), r["file_name"]) for r in outcome.at_kill if r["status"] == "sending"}
    assert caught <= in_flight, "a file that reached its chat before the kill was recorded as on the wire"
    by_status = Counter(r["status"] for r in rows)
    assert set(by_status) <= {"sent", "unknown"}, by_status
    unknown = {(str(r["chat_id"]), r["file_name"]) for r in rows if r["status"] == "unknown"}
    assert unknown == in_flight, "exactly the uploads on the wire at the kill are unknown"
    sent = {(str(r["chat_id"]), r["file_name"]) for r in rows if r["status"] == "sent"}
    assert sent <= set(arrived), "every row marked sent arrived"
    assert set(arrived) - sent <= in_flight, "a file arrived unrecorded only if it was on the wire"

    spool = data_dir / "outbox" / "files"
    assert list(spool.iterdir()) == [], "no spooled copy outlives its row"
    assert "may or may not have been delivered" in outcome.second_log
    assert log_failures(outcome.second_log) == []
