"""What every ``talon`` command shares: finding the config, one-line failures, the database
read without touching it, and the daemon's control socket."""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway.config import DEFAULT_CONFIG, Settings, embedded_defaults_in_use, load_settings
from gateway.errors import RefusedError

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAIL",
    "CommandError",
    "common_options",
    "control_call",
    "fail",
    "read_database",
    "settings_for",
]

EXIT_FAIL = 1
EXIT_CONFIG = 2
T = TypeVar("T")


class CommandError(RefusedError):
    """The command cannot go on; reported in one line (``talon: ...``), exit ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAIL):
        super().__init__(message)
        self.code = code


def common_options() -> argparse.ArgumentParser:
    """The options every command takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", metavar="PATH", help="talon.yaml to use (default: $TALON_CONFIG or ./talon.yaml)"
    )
    # SUPPRESS: the top-level --debug's value stands unless it is given after the command.
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
    )
    return common


def settings_for(args: argparse.Namespace, *, defaults: bool = False) -> Settings:
    """The config ``-c``, then ``$TALON_CONFIG``, then ``./talon.yaml`` names.

    Without any, ``defaults`` commands (run, chat, doctor) use the built-in defaults and say
    so on stderr; every other command stops: it would act on a data dir nobody chose.
    """
    if embedded_defaults_in_use(args.config):
        if not defaults:
            raise CommandError(
                f"no {DEFAULT_CONFIG} here; run this in your bot's folder, pass -c PATH/{DEFAULT_CONFIG} "
                "or set TALON_CONFIG (`talon init DIR` creates one)",
                EXIT_CONFIG,
            )
        print(
            f"talon: no {DEFAULT_CONFIG} here; using the built-in defaults (console channel, assistant "
            "persona, data in ./data). `talon init DIR` writes a config to edit.",
            file=sys.stderr,
        )
    return load_settings(args.config)


def fail(message: str) -> int:
    print(f"talon: {message}", file=sys.stderr)
    return EXIT_FAIL


def read_database(settings: Settings, query: Callable[[Any], Awaitable[T]]) -> T:
    """``query(db)`` on the existing database, opened without migrating (safe while the daemon
    runs); nothing is created when there is no database yet."""
    from gateway.store.db import DB_FILE, SchemaTooNewError
    from gateway.store.engines import open_store, shown_location

    url = settings.database.url
    path = shown_location(url, settings.data_path)
    if not url and not (settings.data_path / DB_FILE).is_file():
        raise CommandError(f"no database at {path} yet; start the daemon once with `talon run`")

    async def run() -> T:
        db = await open_store(url, settings.data_path, migrate=False)
        try:
            return await query(db)
        finally:
            await db.close()

    try:
        return asyncio.run(run())
    except SchemaTooNewError as exc:
        raise CommandError(str(exc)) from None
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise CommandError(f"the database at {path} has no tables yet; run `talon migrate`") from None
        raise CommandError(f"cannot read {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{path} is not a Talon database ({exc}); check data_dir") from None


def control_call(settings: Settings, request: dict[str, Any]) -> dict[str, Any]:
    """One request to the running daemon; raises DaemonNotRunningError when none runs."""
    from gateway.control_client import ControlClient

    async def call() -> dict[str, Any]:
        async with ControlClient(settings.data_path) as client:
            return await client.call(request)

    return asyncio.run(call())
