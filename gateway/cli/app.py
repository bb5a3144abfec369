"""The ``talon`` parser and what every command run goes through: config problems and
failures in one line, a closed output pipe quietly, a bug as one line unless ``--debug``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from gateway import talon_version
from gateway.cli import (
    chat,
    completion,
    control,
    doctor,
    init,
    logs,
    personas,
    records,
    runs,
    service,
    skills,
    usage,
    users,
)
from gateway.cli.common import EXIT_CONFIG, CommandError, common_options
from gateway.config import ConfigError

__all__ = ["build_parser", "main"]

_GROUPS = (
    init,
    service,
    chat,
    control,
    doctor,
    records,
    runs,
    usage,
    personas,
    skills,
    users,
    logs,
    completion,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="talon",
        description="Talon: connect team chat (Telegram, Slack, Discord, web, console) to AI personas.",
    )
    parser.add_argument("--version", action="version", version=f"talon {talon_version()}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    common = common_options()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in _GROUPS:
        group.register(sub, common)
    parser.set_defaults(root_parser=parser)  # `talon completion` reads the commands from it
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        print(f"talon: {len(exc.problems)} config problem(s):", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return EXIT_CONFIG
    except CommandError as exc:
        print(f"talon: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _pipe_closed()
    except Exception as exc:
        if args.debug:
            raise
        print(f"talon: {type(exc).__name__}: {exc} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def _pipe_closed() -> int:
    """The reader of our output went away (``talon threads | head -1``): stop quietly. Standard
    output now points at /dev/null so the flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # as if ended by SIGPIPE, like other Unix tools
