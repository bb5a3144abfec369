"""kill -9 in the middle of a Telegram album: two photos of a media group were taken in (committed,
their turn not yet begun) when the daemon died; the third reaches the restarted daemon, as
Telegram redelivers an update that was not acknowledged. The album is answered once, in one
turn that has all three photos; the third does not get a turn of its own.

``talon run`` as deployed; the Bot API and model stand-ins each in their own process.
"""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    write_deployed_config,
)
from tests.fakes.png_maker import make_png

pytestmark = pytest.mark.timeout(150)

CHANNEL = "team-telegram"
CHAT = 3300
ALBUM = "album-77"


def _album_items(data_dir: Path) -> list[tuple[str, int | None]]:
    """(queue status, run id) of each queued message of the album."""
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT q.status, q.run_id FROM queue_items q JOIN messages m ON m.id = q.message_id "
            "WHERE m.album = ? ORDER BY m.id",
            (ALBUM,),
        ).fetchall()
    except sqlite3.OperationalError:  # the database is not there yet
        return []
    finally:
        conn.close()


def _photo(n: int, caption: str = "") -> dict[str, object]:
    png = base64.b64encode(make_png(2 + n, 2)).decode()
    return {"chat_id": CHAT, "user_id": CHAT, "text": caption, "photo_b64": png, "media_group_id": ALBUM}


async def test_a_photo_redelivered_after_kill_9_joins_its_albums_one_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.03") as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        channel = {
            "name": CHANNEL,
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
        }
        config = write_deployed_config(tmp_path, model_url=model.url, channels=[channel])
        async with deployed_daemon(config) as daemon:
            await post_json(
                f"{bot_api.url}/_fake/inject", {"messages": [_photo(0, "compare these"), _photo(1)]}
            )
            async with asyncio.timeout(20):
                while len(_album_items(data)) < 2:
                    await asyncio.sleep(0.01)
            await daemon.kill()
        at_kill = _album_items(data)
        assert [status for status, _ in at_kill] == ["pending", "pending"], "killed before the album's turn"

        # The third photo was not acknowledged before the kill: Telegram hands it to the next start.
        await post_json(f"{bot_api.url}/_fake/inject", {"messages": [_photo(2)]})
        async with deployed_daemon(config) as daemon:
            async with asyncio.timeout(40):
                while not (await get_json(f"{bot_api.url}/_fake/sent")).get(str(CHAT)):
                    await asyncio.sleep(0.05)
            await asyncio.sleep(3.0)  # a second turn, for the third photo, would have answered by now
            sent = (await get_json(f"{bot_api.url}/_fake/sent"))[str(CHAT)]
            assert await daemon.stop() == 0
            log = daemon.log()
    assert len(sent) == 1, sent
    items = _album_items(data)
    assert [status for status, _ in items] == ["done"] * 3
    assert len({run for _, run in items}) == 1, "all three photos were answered in one turn"
    assert log_failures(log) == []
