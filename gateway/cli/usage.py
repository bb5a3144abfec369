"""``talon usage``: tokens and cost per persona, user, channel or model since a moment; reads
the database, never writes it."""

from __future__ import annotations

import argparse
import re
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.cli.common import read_database, settings_for

__all__ = ["register"]

_AGO = re.compile(r"^(\d+)([hdw])$")
_UNIT = {"h": 3600, "d": 86_400, "w": 7 * 86_400}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "usage",
        parents=[common],
        help="tokens and cost per persona, user, channel or model",
        description="Runs that made model calls, grouped and costliest first. Cost is each run's, priced "
        "with talon.yaml's prices when it ended (runs of unpriced models count 0).",
    )
    p.add_argument(
        "--by",
        choices=["persona", "user", "channel", "model"],
        default="persona",
        help="how to group the runs (default: persona)",
    )
    p.add_argument(
        "--since",
        type=_since,
        default=None,
        metavar="WHEN",
        help="runs started since WHEN: 24h, 7d, 2w, or a date 2026-12-01 (default: the start of this month)",
    )
    p.set_defaults(handler=cmd_usage)


def _since(text: str) -> str:
    if not _AGO.match(text.strip()):
        try:
            datetime.fromisoformat(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a span such as 24h, 7d or 2w, or a date such as 2026-12-01"
            ) from None
    return text.strip()


def since_seconds(text: str, timezone: str, now: float) -> float:
    """``--since`` as epoch seconds: a span back from ``now``, or a date (time) in ``timezone``."""
    match = _AGO.match(text)
    if match:
        return now - int(match[1]) * _UNIT[match[2]]
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=ZoneInfo(timezone))).timestamp()


def cmd_usage(args: argparse.Namespace) -> int:
    from gateway.store.usage import usage_by
    from gateway.usage import Periods, format_cost

    settings = settings_for(args)
    now = time.time()
    since = (
        since_seconds(args.since, settings.timezone, now)
        if args.since is not None
        else Periods.at(now, settings.timezone).month_start
    )
    rows = read_database(settings, lambda db: db.read(usage_by, args.by, since=since))
    shown = datetime.fromtimestamp(since, ZoneInfo(settings.timezone)).strftime("%Y-%m-%d %H:%M %Z")
    if not rows:
        print(f"no model calls since {shown}")
        return 0
    print(f"since {shown}, by {args.by}")
    print(f"{args.by.upper():<28} {'RUNS':>6} {'INPUT':>12} {'OUTPUT':>12}  COST")
    for r in rows:
        cost = format_cost(r.cost, r.currency or settings.currency) if r.cost > 0 else "-"
        print(f"{(r.key or '-')[:28]:<28} {r.runs:>6} {r.input_tokens:>12,} {r.output_tokens:>12,}  {cost}")
    return 0
