"""``talon chat``: talk to a persona through the running daemon (gateway/chat_cli.py)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.cli.common import fail, settings_for
from gateway.config import Settings

__all__ = ["register"]


def _settings(args: argparse.Namespace) -> Settings:
    return settings_for(args, defaults=True)


_fail = fail


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("chat", parents=[common], help="chat with a persona through the running daemon")
    p.add_argument(
        "-m",
        "--message",
        help="send one message, print the reply as the model wrote it and exit (- reads stdin)",
    )
    p.add_argument("--render", action="store_true", help="with -m: print the reply rendered for the terminal")
    p.add_argument("--thread", default="main", help="console thread name (default: main)")
    p.add_argument("--persona", help="persona to talk to (default: the console binding)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for a reply with -m")
    p.set_defaults(handler=cmd_chat)


def cmd_chat(args: argparse.Namespace) -> int:
    from gateway.chat_cli import ChatFailedError, interactive, one_shot, render_for_terminal
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
    reply = "\n\n".join(chunks)
    print(render_for_terminal(reply) if args.render else reply, end="" if args.render else "\n")
    return 0
