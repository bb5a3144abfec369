"""``talon run``, ``talon migrate``, ``talon backup`` and ``talon mcp``: the daemon and its database."""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
from pathlib import Path

from gateway.cli.common import fail, settings_for

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("run", parents=[common], help="start the daemon in the foreground")
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="json: one object per line")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help="overrides log_level")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser(
        "migrate",
        parents=[common],
        help="apply database migrations, or copy the SQLite store to PostgreSQL (--to)",
    )
    p.add_argument(
        "--to",
        metavar="URL",
        help="copy the SQLite store into this empty PostgreSQL database (postgresql://...) and check "
        "every table's row count; the daemon must be stopped",
    )
    p.set_defaults(handler=cmd_migrate)

    p = sub.add_parser(
        "backup", parents=[common], help="consistent copy of the database (safe while running)"
    )
    p.add_argument("path", type=Path, help="the new file to write")
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser("mcp", help="MCP servers of this gateway")
    mcp = p.add_subparsers(dest="mcp_command", metavar="SERVER", required=True)
    p = mcp.add_parser(
        "host-tools",
        parents=[common],
        help="the __talond_host_tools MCP server over stdio",
        description="Serve the host tools as an MCP server on stdin/stdout. Inside an agent run the "
        "run's identity comes from TALON_* environment variables; otherwise --persona/--thread open a "
        "session with the running daemon for as long as this process runs.",
    )
    p.add_argument("--persona", help="persona whose capabilities apply (default: the thread's persona)")
    p.add_argument(
        "--thread", help="thread id from `talon threads`, or a console thread name (default: main)"
    )
    p.set_defaults(handler=cmd_mcp)


def cmd_run(args: argparse.Namespace) -> int:
    from gateway.daemon import run_daemon
    from gateway.data_dir import AlreadyRunningError, prepare_data_dir
    from gateway.errors import RefusedError
    from gateway.logs import file_handler, setup_logging
    from gateway.personas import load_personas
    from gateway.store.engines import shown_location

    settings = settings_for(args, defaults=True)
    personas = load_personas(settings)  # all persona problems reported before anything starts
    prepare_data_dir(settings)
    setup_logging(
        args.log_level or settings.log_level,
        args.log_format,
        settings.secrets(),
        log_file=file_handler(settings),
    )
    try:
        return asyncio.run(run_daemon(settings, personas))
    except (AlreadyRunningError, RefusedError) as exc:  # another daemon, a newer schema
        return fail(str(exc))
    except sqlite3.OperationalError as exc:
        return fail(
            f"cannot open the database at {shown_location(settings.database.url, settings.data_path)}: {exc}"
        )


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.data_dir import AlreadyRunningError, DataDirLock, prepare_data_dir
    from gateway.store.db import SchemaTooNewError
    from gateway.store.engines import open_store

    settings = settings_for(args)
    lock = DataDirLock(prepare_data_dir(settings))
    try:
        lock.acquire()
    except AlreadyRunningError as exc:
        return fail(f"{exc} (the daemon applies migrations itself at start)")
    if args.to:
        from gateway.cli.move import copy_to_postgres

        try:
            return copy_to_postgres(settings, args.to)
        finally:
            lock.release()

    async def migrate() -> list[str]:
        db = await open_store(settings.database.url, settings.data_path, migrate=False)
        try:
            return await db.migrate()
        finally:
            await db.close()

    try:
        applied = asyncio.run(migrate())
    except SchemaTooNewError as exc:
        return fail(str(exc))
    finally:
        lock.release()
    print("\n".join(f"applied {name}" for name in applied) or "database is up to date")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from gateway.store.db import DB_FILE, open_database
    from gateway.store.postgres import POSTGRESQL

    settings = settings_for(args)
    if settings.database.url:
        return fail(POSTGRESQL.backup_refusal)
    source = settings.data_path / DB_FILE
    if not source.exists():
        return fail(f"no database at {source} yet")
    if args.path.exists():
        return fail(f"{args.path} exists; choose a new file")

    async def backup() -> None:
        db = await open_database(source, migrate=False)
        try:
            await db.backup(args.path)
        finally:
            await db.close()

    asyncio.run(backup())
    os.chmod(args.path, 0o600)
    print(f"backed up {source} to {args.path}")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from tools.mcp_server import main as serve_host_tools

    return serve_host_tools(args.config, persona=args.persona, thread=args.thread)
