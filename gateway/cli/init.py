"""``talon init DIR``: a working config folder, from flags or by asking in a terminal."""

from __future__ import annotations

import argparse
from pathlib import Path

from gateway.cli.common import fail

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
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
    p.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from gateway.scaffold import write_scaffold

    try:
        written = write_scaffold(args.dir, force=args.force, data_dir=args.data_dir)
    except FileExistsError as exc:
        return fail(f"{exc} exists; use --force to overwrite")
    for path in written:
        print(f"wrote {path}")
    print(
        f"\nNext: copy {args.dir}/.env.example to {args.dir}/.env, add a key, then\n"
        f"  talon run -c {args.dir}/talon.yaml\n  talon chat -c {args.dir}/talon.yaml"
    )
    return 0
