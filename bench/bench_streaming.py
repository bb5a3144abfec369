"""CPU per preview edit of a streamed reply.

A fake Bot API runs in its own process; this process streams replies into many private
chats at once through the real path: :class:`gateway.live_reply.LiveReply` (the pacer,
composing the preview, recording it in the store) and the Telegram editor on
python-telegram-bot. The edit interval is shortened (the fake enforces no rate limit) so many
edits happen in a short run. Reported: this process's CPU time (user + system) over the
whole run, text deltas included, divided by the edits made; then the same number of bare
``Bot.edit_message_text`` calls (the library's own cost of an edit, which any bot pays) and
the difference, which is what streaming adds. Target: < 2 ms added per edit.

    python -m bench.bench_streaming [--chats 20] [--deltas 400]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from telegram import Bot

from connectors.base import ThreadKey
from connectors.telegram.editing import TelegramEditor
from gateway.live_reply import LiveReply
from gateway.store.db import open_database
from gateway.store.threads import upsert_thread
from tests.deployed.support import fake_process, post_json

_INTERVAL = 0.05


class FastEditor(TelegramEditor):
    def min_interval(self, thread: ThreadKey) -> float:
        return _INTERVAL


async def _stream(live: LiveReply, deltas: int) -> None:
    for i in range(deltas):
        await live.on_text(f"w{i % 100} ")
        await asyncio.sleep(0.005)
    await live.close()


async def run(chats: int, deltas: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with fake_process("tests.fakes.telegram_api.standalone", root) as api:
            ids = [6000 + i for i in range(chats)]
            await post_json(
                f"{api.url}/_fake/inject",
                {"messages": [{"chat_id": c, "text": "hi", "user_id": c} for c in ids]},
            )
            db = await open_database(root / "talon.db")
            bot = Bot(api.info["token"], base_url=f"{api.url}/bot")
            await bot.initialize()
            editor = FastEditor(lambda: bot)  # type: ignore[arg-type, return-value]
            lives = []
            for chat in ids:
                key = ThreadKey("tg", str(chat))
                thread = await db.run_transaction(
                    upsert_thread, key, chat_type="dm", persona="p", now=time.time()
                )
                lives.append(
                    LiveReply(
                        db=db,
                        editor=editor,
                        key=key,
                        chat_type="dm",
                        thread_id=thread.id,
                        run_id=None,
                        mode="edit",
                        interval=_INTERVAL,
                        reply_to=None,
                        status_label=lambda tool: tool,
                    )
                )
            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(_stream(live, deltas) for live in lives))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            edits = sum(live.pacer.shows for live in lives)
            bare = await _bare_edits(bot, ids, edits)
            await bot.shutdown()
            await db.close()
    print(f"{chats} chats, {deltas} deltas each, {edits} previews shown (posts and edits) in {wall:.1f} s")
    per_edit = cpu * 1000 / max(edits, 1)
    print(f"CPU {cpu * 1000:.0f} ms: {per_edit:.2f} ms per streamed edit")
    print(f"bare Bot.edit_message_text: {bare:.2f} ms per edit")
    print(f"streaming adds {per_edit - bare:.2f} ms of CPU per edit (target < 2 ms)")


async def _bare_edits(bot: Bot, chats: list[int], n: int) -> float:
    """CPU milliseconds per ``edit_message_text`` call made directly, as many as streamed."""
    targets = [(chat, (await bot.send_message(chat, "x")).message_id) for chat in chats]
    per_chat = max(n // len(chats), 1)

    async def edits(chat: int, message_id: int) -> None:
        for i in range(per_chat):
            await bot.edit_message_text(f"text {i}", chat, message_id)

    cpu = time.process_time()
    await asyncio.gather(*(edits(c, m) for c, m in targets))
    return (time.process_time() - cpu) * 1000 / (per_chat * len(chats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=400)
    args = parser.parse_args()
    asyncio.run(run(args.chats, args.deltas))


if __name__ == "__main__":
    main()
