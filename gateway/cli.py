"""The ``talon`` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config import DEFAULT_CONFIG, ConfigError, Settings, embedded_defaults_in_use, load_settings

EXIT_FAIL = 1
EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="talon",
        description="Talon: connect team chat (Telegram, Slack, Discord, console) to AI personas.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", metavar="PATH", help="talon.yaml to use (default: $TALON_CONFIG or ./talon.yaml)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("init", parents=[common], help="create a working config in DIR")
    p.add_argument(
        "dir", type=Path, help="directory to create (talon.yaml, personas/assistant/, .env.example)"
    )
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument(
        "--data-dir",
        metavar="PATH",
        help="data_dir written into talon.yaml (default: data, inside DIR); e.g. /data in a container",
    )

    p = sub.add_parser("run", parents=[common], help="start the daemon in the foreground")
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="json: one object per line")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), help="overrides log_level")

    p = sub.add_parser("chat", parents=[common], help="chat with a persona through the running daemon")
    p.add_argument("-m", "--message", help="send one message, print the reply and exit")
    p.add_argument("--thread", default="main", help="console thread name (default: main)")
    p.add_argument("--persona", help="persona to talk to (default: the console binding)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for a reply with -m")

    sub.add_parser("status", parents=[common], help="channels, queue, outbox and dead letters")
    sub.add_parser("doctor", parents=[common], help="check config, personas, providers and the data dir")
    p = sub.add_parser("threads", parents=[common], help="list threads")
    p.add_argument("--limit", type=int, default=50)
    sub.add_parser("migrate", parents=[common], help="apply database migrations")
    p = sub.add_parser(
        "backup", parents=[common], help="consistent copy of the database (safe while running)"
    )
    p.add_argument("path", type=Path)

    p = sub.add_parser("send", parents=[common], help="post a notification into a channel")
    p.add_argument("channel", help="configured channel name")
    p.add_argument("text", help="Markdown text, or - to read standard input")
    p.add_argument("--chat", help="chat id (default: the channel's home_chat)")

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

    p = sub.add_parser("audit", parents=[common], help="recent host-tool audit log entries")
    p.add_argument("--limit", type=int, default=50, help="how many entries (newest first; default 50)")
    sub.add_parser("schedules", parents=[common], help="list schedules with their next run")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = COMMANDS[args.command]
    try:
        return handler(args)
    except ConfigError as exc:
        print(f"talon: {len(exc.problems)} config problem(s):", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


def _fail(message: str) -> int:
    print(f"talon: {message}", file=sys.stderr)
    return EXIT_FAIL


# ---------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    from gateway.scaffold import write_scaffold

    try:
        written = write_scaffold(args.dir, force=args.force, data_dir=args.data_dir)
    except FileExistsError as exc:
        return _fail(f"{exc} exists; use --force to overwrite")
    for path in written:
        print(f"wrote {path}")
    print(
        f"\nNext: copy {args.dir}/.env.example to {args.dir}/.env, add a key, then\n"
        f"  talon run -c {args.dir}/talon.yaml\n  talon chat -c {args.dir}/talon.yaml"
    )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from gateway.daemon import run_daemon
    from gateway.data_dir import AlreadyRunningError
    from gateway.logs import setup_logging
    from gateway.personas import load_personas
    from gateway.store.db import SchemaTooNewError

    settings = _settings(args)
    if embedded_defaults_in_use(args.config):
        print(
            f"talon: no {DEFAULT_CONFIG} here; running the built-in defaults (console channel, assistant "
            "persona, data in ./data). `talon init DIR` writes a config to edit.",
            file=sys.stderr,
        )
    setup_logging(args.log_level or settings.log_level, args.log_format, settings.secrets())
    personas = load_personas(settings)  # all persona problems reported before anything starts
    try:
        return asyncio.run(run_daemon(settings, personas))
    except (AlreadyRunningError, SchemaTooNewError) as exc:
        return _fail(str(exc))


def cmd_chat(args: argparse.Namespace) -> int:
    from gateway.chat_cli import ChatFailedError, interactive, one_shot
    from gateway.control_client import DaemonNotRunningError

    data = _settings(args).data_path
    try:
        if args.message is None:
            asyncio.run(interactive(data, thread=args.thread, persona=args.persona))
            return 0
        text = sys.stdin.read() if args.message == "-" else args.message
        chunks = asyncio.run(
            one_shot(data, text, thread=args.thread, persona=args.persona, timeout=args.timeout)
        )
    except DaemonNotRunningError as exc:
        return _fail(str(exc))
    except ChatFailedError as exc:
        return _fail(str(exc))
    except TimeoutError:
        return _fail(f"no reply within {args.timeout:g}s (--timeout)")
    except ConnectionError as exc:
        return _fail(f"lost the daemon: {exc}")
    print("\n\n".join(chunks))
    return 0


def _control_call(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    from gateway.control_client import ControlClient

    async def call() -> dict[str, Any]:
        async with ControlClient(_settings(args).data_path) as client:
            return await client.call(request)

    return asyncio.run(call())


def cmd_status(args: argparse.Namespace) -> int:
    from gateway.control_client import DaemonNotRunningError

    try:
        reply = _control_call(args, {"op": "status"})
    except DaemonNotRunningError as exc:
        return _fail(str(exc))
    status = reply.get("status", {})
    print(
        f"daemon pid {status.get('pid')}, up {status.get('uptime')}s, {status.get('running_turns')} turns running"
    )
    for name, ch in status.get("channels", {}).items():
        detail = f" — {ch['detail']}" if ch.get("detail") else ""
        print(f"  channel {name}: {ch['state']}{detail}")
    print(f"  queue: {json.dumps(status.get('queue', {}))}  outbox: {json.dumps(status.get('outbox', {}))}")
    dead = status.get("dead_letters", [])
    if dead:
        print(f"  dead letters ({len(dead)}):")
        for d in dead:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["updated_at"]))
            print(
                f"    #{d['id']} thread {d['thread_id']} ({d['channel']}:{d['chat_id']}) {when}: {d['last_error']}"
            )
    return 0


def cmd_send(args: argparse.Namespace) -> int:
    from gateway.control_client import DaemonNotRunningError

    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        reply = _control_call(args, {"op": "send", "channel": args.channel, "chat": args.chat, "text": text})
    except DaemonNotRunningError as exc:
        return _fail(str(exc))
    if not reply.get("ok"):
        return _fail(reply.get("error", "send failed"))
    print(f"queued {reply['chunks']} message(s) on thread {reply['thread_id']}")
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    from gateway.store.db import DB_FILE, open_database
    from gateway.store.threads import recent_threads

    async def list_threads() -> list[Any]:
        db = await open_database(_settings(args).data_path / DB_FILE, migrate=False)
        try:
            return await db.read(recent_threads, args.limit)
        finally:
            await db.close()

    rows = asyncio.run(list_threads())
    print(f"{'ID':>5}  {'CHANNEL':<16} {'CHAT':<24} {'PERSONA':<14} {'MSGS':>5}  UPDATED")
    for r in rows:
        chat = r.chat_id + (f"/{r.topic}" if r.topic else "")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.updated_at))
        print(f"{r.id:>5}  {r.channel:<16} {chat:<24} {r.persona or '-':<14} {r.messages:>5}  {when}")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from gateway.data_dir import AlreadyRunningError, DataDirLock, prepare_data_dir
    from gateway.store.db import DB_FILE, SchemaTooNewError, apply_migrations, open_database

    settings = _settings(args)
    lock = DataDirLock(prepare_data_dir(settings))
    try:
        lock.acquire()
    except AlreadyRunningError as exc:
        return _fail(f"{exc} (the daemon applies migrations itself at start)")

    async def migrate() -> list[str]:
        db = await open_database(settings.data_path / DB_FILE, migrate=False)
        try:
            return await apply_migrations(db.conn)
        finally:
            await db.close()

    try:
        applied = asyncio.run(migrate())
    except SchemaTooNewError as exc:
        return _fail(str(exc))
    finally:
        lock.release()
    print("\n".join(f"applied {name}" for name in applied) or "database is up to date")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    from gateway.store.db import DB_FILE, open_database

    settings = _settings(args)
    source = settings.data_path / DB_FILE
    if not source.exists():
        return _fail(f"no database at {source} yet")
    if args.path.exists():
        return _fail(f"{args.path} exists; choose a new file")

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


def _read_only(args: argparse.Namespace, query: Callable[[Any], Any]) -> Any:
    """Run ``query(db)`` on the database opened without migrating (safe while the daemon runs)."""
    from gateway.store.db import DB_FILE, open_database

    path = _settings(args).data_path / DB_FILE
    if not path.exists():
        raise FileNotFoundError(f"no database at {path} yet; start the daemon once with `talon run`")

    async def run() -> Any:
        db = await open_database(path, migrate=False)
        try:
            return await query(db)
        finally:
            await db.close()

    return asyncio.run(run())


def cmd_mcp(args: argparse.Namespace) -> int:
    from tools.mcp_server import main as serve_host_tools

    return serve_host_tools(args.config, persona=args.persona, thread=args.thread)


def cmd_audit(args: argparse.Namespace) -> int:
    from tools.audit import recent_entries

    try:
        rows = _read_only(args, lambda db: recent_entries(db, args.limit))
    except FileNotFoundError as exc:
        return _fail(str(exc))
    print(
        f"{'TIME':<19}  {'RUN':>5} {'THREAD':>6}  {'PERSONA':<12} {'TOOL':<16} {'DECISION':<8} {'STATUS':<7} DETAIL"
    )
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["ts"]))
        print(
            f"{when:<19}  {_dash(r['run_id']):>5} {_dash(r['thread_id']):>6}  {_dash(r['persona']):<12} "
            f"{_dash(r['tool']):<16} {r['decision']:<8} {_dash(r['status']):<7} {r['detail'] or ''}"
        )
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    from gateway.scheduler import list_schedules

    try:
        rows = _read_only(args, list_schedules)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    if not rows:
        print("no schedules")
        return 0
    print(
        f"{'ID':<14} {'PERSONA':<12} {'LABEL':<20} {'WHEN':<25} {'TIMEZONE':<16} {'ON':<3} {'NEXT RUN':<25} LAST"
    )
    for s in rows:
        when = s["cron_expr"] or (f"once {s['run_at']}" if s["run_at"] else "-")
        last = f"{s['last_status']} at {s['last_run_at']}" if s["last_status"] else "-"
        print(
            f"{s['id']:<14} {s['persona']:<12} {(s['label'] or '-')[:20]:<20} {when:<25} {s['timezone']:<16} "
            f"{'yes' if s['enabled'] else 'no':<3} {s['next_run_at'] or '-':<25} {last}"
        )
    return 0


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)


def cmd_doctor(args: argparse.Namespace) -> int:
    from gateway.doctor import run_doctor

    return asyncio.run(run_doctor(_settings(args)))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "init": cmd_init,
    "run": cmd_run,
    "chat": cmd_chat,
    "status": cmd_status,
    "doctor": cmd_doctor,
    "threads": cmd_threads,
    "migrate": cmd_migrate,
    "backup": cmd_backup,
    "send": cmd_send,
    "mcp": cmd_mcp,
    "audit": cmd_audit,
    "schedules": cmd_schedules,
}

if __name__ == "__main__":
    sys.exit(main())
