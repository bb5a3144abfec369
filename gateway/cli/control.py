"""``talon status``, ``talon send``, ``talon dead-letters`` and ``talon schedules``: the running
daemon, through its control socket (the last two act on the database when it is stopped)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gateway.cli.common import CommandError, control_call, fail, read_database, settings_for
from gateway.config import Settings

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("status", parents=[common], help="channels, queue, outbox and dead letters")
    p.add_argument("--json", action="store_true", help="the daemon's status as one JSON object")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("send", parents=[common], help="post a notification into a channel")
    p.add_argument("channel", help="configured channel name")
    p.add_argument("text", help="Markdown text, or - to read standard input")
    p.add_argument("--chat", help="chat id (default: the channel's home_chat)")
    p.set_defaults(handler=cmd_send)

    p = sub.add_parser(
        "dead-letters",
        parents=[common],
        help="list, retry or drop queue items that failed for good",
        description="Dead letters are turns that failed for good. `retry ID` queues one again with "
        "fresh attempts; `drop ID` gives it up, so it leaves `talon status`. Through the daemon when it "
        "runs; otherwise on the database, and the next start runs what was retried.",
    )
    p.add_argument("action", nargs="?", choices=("list", "retry", "drop"), default="list")
    p.add_argument("id", nargs="?", type=int, help="the dead letter's number, as `list` shows it")
    p.set_defaults(handler=cmd_dead_letters, usage_error=p.error)

    p = sub.add_parser(
        "schedules",
        parents=[common],
        help="list schedules; pause, resume or run one now; show its history",
        description="`list` (the default) shows every schedule with its next run and last result; "
        "`pause ID` stops it firing, `resume ID` lets it fire again from now on (nothing missed while "
        "paused is caught up), `run ID` fires it now, `history ID` shows its recent attempts. Through "
        "the daemon when it runs; otherwise on the database, and the next start acts on it.",
    )
    p.add_argument("action", nargs="?", choices=("list", "pause", "resume", "run", "history"), default="list")
    p.add_argument("id", nargs="?", help="the schedule's id, as `list` shows it")
    p.set_defaults(handler=cmd_schedules, usage_error=p.error)


def cmd_status(args: argparse.Namespace) -> int:
    from gateway.control_client import DaemonNotRunningError

    try:
        reply = control_call(settings_for(args), {"op": "status"})
    except DaemonNotRunningError as exc:
        return fail(str(exc))
    status = reply.get("status", {})
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(
        f"daemon pid {status.get('pid')}, up {status.get('uptime')}s, {status.get('running_turns')} turns running"
    )
    for name, ch in status.get("channels", {}).items():
        state, detail = ch["state"], ch.get("detail") or ""
        if ch.get("retry_in") is not None:  # a start that failed for now
            state, detail = f"retrying in {ch['retry_in']:.0f} s", f"last error: {detail}"
        print(f"  channel {name}: {state}{f' — {detail}' if detail else ''}")
    print(f"  queue: {json.dumps(status.get('queue', {}))}  outbox: {json.dumps(status.get('outbox', {}))}")
    cluster = status.get("cluster")
    if cluster:
        _print_cluster(cluster)
    for f in status.get("fallbacks", []):
        print(
            f"  fallbacks in the last day: {f['persona']}: {f['runs']} runs answered by a fallback model "
            f"({f['fallbacks']} calls), the last by {f['last_model']}"
        )
    dead = status.get("dead_letters", [])
    if dead:
        print(f"  dead letters ({len(dead)}; `talon dead-letters` to retry or drop them):")
        for d in dead:
            print(f"    {_letter(d)}")
    return 0


def _print_cluster(cluster: dict[str, Any]) -> None:
    roles = ", ".join(cluster.get("roles") or []) or "none"
    print(f"  cluster: {len(cluster['nodes'])} nodes; this is {cluster['node_id']}, holding {roles}")
    now = time.time()
    for node in cluster["nodes"]:
        state = "alive" if node["alive"] else "lost (its work moves to the others)"
        print(
            f"    node {node['node_id']}: {state}, host {node['host']} pid {node['pid']}, "
            f"talon {node['version']}, heartbeat {max(0.0, now - node['heartbeat_at']):.0f} s ago"
        )


def cmd_send(args: argparse.Namespace) -> int:
    from gateway.control_client import DaemonNotRunningError

    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        reply = control_call(
            settings_for(args), {"op": "send", "channel": args.channel, "chat": args.chat, "text": text}
        )
    except DaemonNotRunningError as exc:
        return fail(str(exc))
    if not reply.get("ok"):
        return fail(reply.get("error", "send failed"))
    print(f"queued {reply['chunks']} message(s) on thread {reply['thread_id']}")
    return 0


def cmd_dead_letters(args: argparse.Namespace) -> int:
    from gateway.control_client import DaemonNotRunningError
    from gateway.dead_letters import OP

    if args.action != "list" and args.id is None:
        args.usage_error(
            f"{args.action} needs the dead letter's ID (the # number `talon dead-letters` shows)"
        )
    settings = settings_for(args)
    offline = False
    try:
        reply = control_call(settings, {"op": OP, "action": args.action, "id": args.id})
    except DaemonNotRunningError:
        offline = True
        reply = _without_daemon(settings, args.action, args.id)
    if reply.get("type") == "error" or not reply.get("ok"):
        return fail(str(reply.get("error", "the daemon refused")))
    if args.action == "list":
        letters = reply.get("letters", [])
        print("\n".join(_letter(d) for d in letters) or "no dead letters")
    elif args.action == "retry":
        later = "; the daemon runs it when it starts" if offline else ""
        print(f"dead letter #{args.id} is queued again on thread {reply['thread_id']}{later}")
    else:
        print(f"dropped dead letter #{args.id}")
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    from gateway.schedule_ops import CHANGES, OP, manage

    if args.action != "list" and not args.id:
        args.usage_error(f"{args.action} needs the schedule's ID (as `talon schedules` lists it)")
    reply, offline = _through_daemon(
        settings_for(args), {"op": OP, "action": args.action, "id": args.id}, manage, args.action in CHANGES
    )
    if reply.get("type") == "error" or not reply.get("ok"):
        return fail(str(reply.get("error", "the daemon refused")))
    later = "; the daemon acts on it when it starts" if offline else ""
    if args.action == "list":
        _print_schedules(reply.get("schedules", []))
    elif args.action == "history":
        runs = reply.get("runs", [])
        for r in runs:
            took = f"{r['duration_ms']} ms" if r.get("duration_ms") is not None else "-"
            print(f"{r['due']:<25} #{r['attempt']:<2} {r['status']:<9} {took:>9}  {r.get('error') or ''}")
        if not runs:
            print(f"schedule {args.id} has not run yet")
    else:
        done = {"pause": "paused", "resume": "resumed", "run": "runs now"}[args.action]
        print(f"schedule {args.id} {done}{later}")
    return 0


def _print_schedules(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no schedules")
        return
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


def _through_daemon(
    settings: Settings, request: dict[str, Any], manage: Any, changes: bool
) -> tuple[dict[str, Any], bool]:
    """The daemon's reply to ``request``; when it is stopped, ``manage(db, action, id)`` on the
    database instead (under the data-dir lock when it ``changes`` something). Returns the reply
    and whether the daemon was stopped."""
    from gateway.control_client import DaemonNotRunningError
    from gateway.data_dir import AlreadyRunningError, DataDirLock

    try:
        return control_call(settings, request), False
    except DaemonNotRunningError:
        pass
    action, item = request["action"], request["id"]
    if not changes:
        return read_database(settings, lambda db: manage(db, action, item)), True
    lock = DataDirLock(settings.data_path)
    try:
        if settings.data_path.is_dir():
            lock.acquire()
    except AlreadyRunningError as exc:
        raise CommandError(f"{exc} (its control socket did not answer)") from None
    try:
        return read_database(settings, lambda db: manage(db, action, item)), True
    finally:
        lock.release()


def _without_daemon(settings: Settings, action: str, item_id: int | None) -> dict[str, Any]:
    """The daemon is stopped: read the database, or change it under the data-dir lock."""
    from gateway.data_dir import AlreadyRunningError, DataDirLock
    from gateway.dead_letters import manage

    if action == "list":
        return read_database(settings, lambda db: manage(db, action, item_id))
    lock = DataDirLock(settings.data_path)
    try:
        if settings.data_path.is_dir():
            lock.acquire()
    except AlreadyRunningError as exc:
        raise CommandError(f"{exc} (its control socket did not answer)") from None
    try:
        return read_database(settings, lambda db: manage(db, action, item_id))
    finally:
        lock.release()


def _letter(d: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["updated_at"]))
    return f"#{d['id']} thread {d['thread_id']} ({d['channel']}:{d['chat_id']}) {when}: {d['last_error']}"
