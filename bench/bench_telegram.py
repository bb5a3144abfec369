"""Telegram throughput: the gateway against a bare python-telegram-bot echo bot.

Both run in this process against the same fake Bot API server (long polling). A burst of
messages over many private chats is injected; the time until every message is answered
gives the message rate. The gateway runs its whole path (policy, pipeline commit before
the offset moves, queue, turn with an instantly answering model, renderer, outbox); the
echo bot replies straight from its handler.

    python -m bench.bench_telegram [--chats 50] [--per-chat 10]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

from bench.bench_e2e import InstantModel
from gateway.daemon import Gateway
from gateway.heap import settle_heap
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import running_gateway, write_config


async def _all_echoed(fake: FakeTelegramAPI, chats: int, per_chat: int, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not all(len(fake.sent_messages(1000 + c)) >= per_chat for c in range(chats)):
            await asyncio.sleep(0.005)


async def _all_answered(gw: Gateway, total: int, timeout: float) -> None:
    """Every message's turn is done and every reply chunk delivered (a reply may answer
    several messages that arrived while its chat was busy)."""
    async with asyncio.timeout(timeout):
        while True:
            row = await gw.db.fetchone(
                "SELECT (SELECT COUNT(*) FROM queue_items WHERE status = 'done') AS done, "
                "(SELECT COUNT(*) FROM outbox WHERE status != 'sent') AS unsent"
            )
            if row["done"] >= total and row["unsent"] == 0:
                return
            await asyncio.sleep(0.005)


def _inject(fake: FakeTelegramAPI, chats: int, per_chat: int) -> None:
    for n in range(per_chat):
        for c in range(chats):
            fake.inject_message(1000 + c, f"m{n}", user_id=1000 + c)


async def echo_bot(chats: int, per_chat: int) -> float:
    async with FakeTelegramAPI() as fake:

        async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            assert update.effective_message is not None
            await update.effective_message.reply_text(update.effective_message.text or "")

        app = (
            ApplicationBuilder()
            .token(fake.token)
            .base_url(f"{fake.url}/bot")
            .concurrent_updates(True)
            .build()
        )
        app.add_handler(MessageHandler(filters.TEXT, echo))
        async with app:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(poll_interval=0, timeout=1)
            started = time.perf_counter()
            _inject(fake, chats, per_chat)
            await _all_echoed(fake, chats, per_chat, 120)
            elapsed = time.perf_counter() - started
            await app.updater.stop()
            await app.stop()
    return chats * per_chat / elapsed


async def gateway(chats: int, per_chat: int) -> float:
    async with FakeTelegramAPI() as fake:
        with tempfile.TemporaryDirectory() as tmp:
            config = write_config(
                Path(tmp),
                provider={"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "x"},
                extra={
                    "channels": [
                        {
                            "name": "tg",
                            "type": "telegram",
                            "token": fake.token,
                            "api_base_url": fake.url,
                            "poll_timeout": 1,
                        }
                    ],
                    "bindings": [{"channel": "tg", "persona": "assistant"}],
                    "queue": {"workers": 32},
                    "log_level": "warning",
                },
            )
            async with running_gateway(config) as gw:
                await gw.warmed_up()  # SDK imports would steal the GIL mid-run
                settle_heap()  # as `talon run` does once warm
                gw.providers["fake"] = InstantModel()
                started = time.perf_counter()
                _inject(fake, chats, per_chat)
                await _all_answered(gw, chats * per_chat, 120)
                elapsed = time.perf_counter() - started
    return chats * per_chat / elapsed


async def run(chats: int, per_chat: int) -> None:
    bare = await echo_bot(chats, per_chat)
    ours = await gateway(chats, per_chat)
    print(f"telegram: {chats} chats x {per_chat} messages against the fake Bot API")
    print(f"  bare PTB echo bot: {bare:,.0f} messages/s")
    print(f"  talon gateway:     {ours:,.0f} messages/s")
    print(f"  ratio:             {ours / bare:.0%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chats", type=int, default=50)
    ap.add_argument("--per-chat", type=int, default=10)
    args = ap.parse_args()
    asyncio.run(run(args.chats, args.per_chat))


if __name__ == "__main__":
    main()
