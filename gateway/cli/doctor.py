"""``talon doctor [--fix]``: check what `talon run` needs (gateway/doctor.py)."""

from __future__ import annotations

import argparse
import asyncio

from gateway.cli.common import settings_for
from gateway.config import embedded_defaults_in_use, resolve_config_path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("doctor", parents=[common], help="check config, personas, providers and the data dir")
    p.add_argument(
        "--fix", action="store_true", help="create a missing data dir and make it and its files owner-only"
    )
    p.set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from gateway.doctor import run_doctor

    defaults = embedded_defaults_in_use(args.config)
    settings = settings_for(args, defaults=True)
    config = None if defaults else resolve_config_path(args.config)
    return asyncio.run(run_doctor(settings, config=config, fix=args.fix))
