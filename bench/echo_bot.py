"""A bare python-telegram-bot echo bot: the reference the Telegram benchmark compares with.

    python -m bench.echo_bot --api URL --token TOKEN

Long polling with concurrent updates, each message answered from its handler with
``reply_text``; nothing is stored, rendered or paced.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from telegram import Update
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    assert update.effective_message is not None
    await update.effective_message.reply_text(update.effective_message.text or "")


async def run(api: str, token: str) -> None:
    app = ApplicationBuilder().token(token).base_url(f"{api}/bot").concurrent_updates(True).build()
    app.add_handler(MessageHandler(filters.TEXT, echo))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        print("ready", flush=True)
        await stop.wait()
        await app.updater.stop()
        await app.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    asyncio.run(run(args.api, args.token))


if __name__ == "__main__":
    main()
