"""Inbound webhooks through a deployed ``talon run``: a GitHub-signed delivery becomes one
answer in the Telegram chat, a redelivery answers nothing more, and refused requests store
nothing."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import sqlite3
import time
from pathlib import Path

import aiohttp
import pytest

from tests.deployed.support import deployed_daemon, fake_process, get_json, post_json, write_deployed_config

pytestmark = pytest.mark.timeout(180)

SECRET = "gh-hook-secret-0123456789"
CHAT = 777


def _signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _messages(data: Path) -> int:
    conn = sqlite3.connect(f"file:{data / 'talon.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    finally:
        conn.close()


async def test_a_signed_delivery_is_answered_once_in_the_chat_across_a_redelivery(tmp_path: Path) -> None:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        channel = {
            "name": "tg",
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
        }
        route = {
            "name": "github",
            "path": "/hooks/github",
            "auth": "github",
            "secret": SECRET,
            "events": ["push"],
            "prompt": "Push to {repository.full_name} by {pusher.name}: {commits.0.message} {nope.none}",
            "persona": "assistant",
            "channel": "tg",
            "chat": CHAT,
        }
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[channel],
            http={"listen": "127.0.0.1:0", "max_body_bytes": 4096, "webhooks": [route]},
        )
        payload = {
            "repository": {"full_name": "acme/rocket"},
            "pusher": {"name": "ada"},
            "commits": [{"message": "fix <b>launch</b>"}],
        }
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": _signed(body),
        }
        data = tmp_path / "data"
        async with deployed_daemon(config) as daemon, aiohttp.ClientSession() as session:
            url = (data / "http.url").read_text().strip() + "/hooks/github"
            await post_json(f"{bot_api.url}/_fake/chats", {"chat_id": CHAT, "chat_type": "group"})
            before = _messages(data)

            async with session.post(
                url, data=body, headers={**headers, "X-Hub-Signature-256": _signed(body, "x" * 20)}
            ) as resp:
                assert resp.status == 401
            async with session.post(
                url, data=b"{not json", headers={**headers, "X-Hub-Signature-256": _signed(b"{not json")}
            ) as resp:
                assert resp.status == 400
            big = b'{"a": "' + b"x" * 5000 + b'"}'
            async with session.post(
                url, data=big, headers={**headers, "X-Hub-Signature-256": _signed(big)}
            ) as resp:
                assert resp.status == 413
            async with session.post(url, data=body, headers={**headers, "X-GitHub-Event": "issues"}) as resp:
                assert resp.status == 202 and (await resp.json())["status"] == "ignored"
            assert _messages(data) == before  # nothing refused or ignored was stored

            async with session.post(url, data=body, headers=headers) as resp:
                assert resp.status == 202 and (await resp.json())["status"] == "accepted"
            deadline = time.monotonic() + 60
            while not (sent := (await get_json(f"{bot_api.url}/_fake/sent")).get(str(CHAT))):
                assert time.monotonic() < deadline, "the webhook's answer never reached the chat"
                await asyncio.sleep(0.2)
            async with session.post(url, data=body, headers=headers) as resp:  # GitHub's redelivery
                assert resp.status == 202 and (await resp.json())["status"] == "duplicate"
            await asyncio.sleep(2)  # a second answer, were there one, would be sent by now
            sent = (await get_json(f"{bot_api.url}/_fake/sent")).get(str(CHAT))
            assert await daemon.stop() == 0

    assert len(sent) == 1
    assert "Push to acme/rocket by ada: fix" in sent[0]
    assert "(missing nope.none)" in sent[0]
    assert SECRET not in daemon.log()
