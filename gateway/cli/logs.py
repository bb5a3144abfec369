"""``talon logs [-f] [-n N]``: the daemon's log file (log_file in talon.yaml)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import TextIO

from gateway.cli.common import CommandError, settings_for

__all__ = ["register"]

POLL_SECONDS = 0.25


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("logs", parents=[common], help="the daemon's log file: the last lines, or follow it")
    p.add_argument(
        "-n", "--lines", type=int, default=50, metavar="N", help="how many last lines (default 50)"
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C ends)")
    p.set_defaults(handler=cmd_logs)


def cmd_logs(args: argparse.Namespace) -> int:
    from gateway.logs import log_file_path

    path = log_file_path(settings_for(args))
    if path is None:
        raise CommandError("log_file.path is null in talon.yaml: this daemon keeps no log file")
    if not path.is_file():
        raise CommandError(f"no log file at {path} yet; the daemon writes it while it runs (`talon run`)")
    with path.open(encoding="utf-8", errors="replace") as file:
        sys.stdout.writelines(deque(file, maxlen=max(args.lines, 0)))
        sys.stdout.flush()
        if args.follow:
            try:
                _follow(path, file)
            except KeyboardInterrupt:
                pass
    return 0


def _follow(path: Path, file: TextIO) -> None:
    """Print what is appended; after a rotation, carry on in the new file from its start."""
    inode = os.fstat(file.fileno()).st_ino
    try:
        while True:
            line = file.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            time.sleep(POLL_SECONDS)
            try:
                current = path.stat()
            except FileNotFoundError:
                continue  # between the rename and the new file
            if current.st_ino != inode or current.st_size < file.tell():
                file.close()
                file = path.open(encoding="utf-8", errors="replace")
                inode = os.fstat(file.fileno()).st_ino
    finally:
        file.close()
