"""``talon threads`` and ``talon audit``: read the database, never write it."""

from __future__ import annotations

import argparse
import time
from typing import Any

from gateway.cli.common import read_database, settings_for

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("threads", parents=[common], help="list threads")
    p.add_argument("--limit", type=int, default=50, help="how many (most recently updated first; default 50)")
    p.set_defaults(handler=cmd_threads)

    p = sub.add_parser("audit", parents=[common], help="recent host-tool audit log entries")
    p.add_argument("--limit", type=int, default=50, help="how many entries (newest first; default 50)")
    p.set_defaults(handler=cmd_audit)


def cmd_threads(args: argparse.Namespace) -> int:
    from gateway.store.threads import recent_threads

    rows = read_database(settings_for(args), lambda db: db.read(recent_threads, args.limit))
    print(f"{'ID':>5}  {'CHANNEL':<16} {'CHAT':<24} {'PERSONA':<14} {'MSGS':>5}  UPDATED")
    for r in rows:
        chat = r.chat_id + (f"/{r.topic}" if r.topic else "")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.updated_at))
        print(f"{r.id:>5}  {r.channel:<16} {chat:<24} {r.persona or '-':<14} {r.messages:>5}  {when}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from gateway.store.audit import recent_entries

    rows = read_database(settings_for(args), lambda db: db.read(recent_entries, args.limit))
    print(
        f"{'TIME':<19}  {'RUN':>5} {'THREAD':>6}  {'PERSONA':<12} {'TOOL':<16} {'DECISION':<8} {'STATUS':<7} DETAIL"
    )
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.ts))
        print(
            f"{when:<19}  {_dash(r.run_id):>5} {_dash(r.thread_id):>6}  {_dash(r.persona):<12} "
            f"{_dash(r.tool):<16} {r.decision:<8} {_dash(r.status):<7} {r.detail or ''}"
        )
    return 0


def _dash(value: Any) -> str:
    return "-" if value is None else str(value)
