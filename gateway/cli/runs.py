"""``talon runs``: recent runs with their counts, or one run's trace; reads the database, never
writes it."""

from __future__ import annotations

import argparse
import time
from typing import Any

from gateway.cli.common import CommandError, read_database, settings_for

__all__ = ["register"]

MAX_LIMIT = 1000
_DETAIL_CHARS = 100  # a payload value shown in the event list is cut here


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "runs", parents=[common], help="recent runs with tokens and tool calls, or one run's trace"
    )
    p.add_argument("run", nargs="?", type=_run_id, metavar="RUN", help="a run id: show its events in order")
    p.add_argument("--thread", type=_run_id, metavar="T", help="only runs of this thread (`talon threads`)")
    p.add_argument(
        "--limit",
        type=_limit,
        default=20,
        metavar="N",
        help=f"how many runs (newest first; default 20, max {MAX_LIMIT})",
    )
    p.set_defaults(handler=cmd_runs)


def _run_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id; ids are whole numbers from 1")
    return int(text)


def _limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def cmd_runs(args: argparse.Namespace) -> int:
    from gateway.store.traces import get_run, recent_runs, run_events

    settings = settings_for(args)
    if args.run is None:
        rows = read_database(
            settings, lambda db: db.read(recent_runs, limit=args.limit, thread_id=args.thread)
        )
        _print_runs(rows)
        return 0

    async def one(db: Any) -> tuple[Any, list[Any]]:
        return await db.read(lambda conn: (get_run(conn, args.run), list(run_events(conn, args.run))))

    run, events = read_database(settings, one)
    if run is None:
        raise CommandError(f"no run {args.run}; `talon runs` lists the recent ones")
    _print_run(run, events)
    return 0


def _print_runs(rows: list[Any]) -> None:
    if not rows:
        print("no runs")
        return
    print(
        f"{'ID':>6}  {'THREAD':>6}  {'PERSONA':<14} {'STARTED':<16} {'DURATION':>9} {'MODEL':>5} "
        f"{'TOOLS':>5} {'TOKENS':>9}  OUTCOME"
    )
    for r in rows:
        print(
            f"{r.id:>6}  {r.thread_id:>6}  {r.persona[:14]:<14} {_when(r.started_at):<16} "
            f"{_duration(r.started_at, r.ended_at):>9} {r.model_calls:>5} {r.tool_calls:>5} "
            f"{r.input_tokens + r.output_tokens:>9}  {r.status}"
        )


def _print_run(run: Any, events: list[Any]) -> None:
    print(
        f"run {run.id} · thread {run.thread_id} · {run.persona} · {run.model or '-'} · {run.status} · "
        f"started {_when(run.started_at)} · {_duration(run.started_at, run.ended_at)} · "
        f"{run.model_calls} model calls · {run.tool_calls} tool calls · "
        f"{run.input_tokens} tokens in, {run.output_tokens} out"
    )
    if run.error:
        print(f"error: {run.error}")
    if not events:
        print("no trace events (traced runs only, kept traces.retention_days)")
        return
    print(f"{'SEQ':>4}  {'TIME':<12}  {'KIND':<10} {'NAME':<22} {'MS':>9}  {'ERROR':<17} DETAIL")
    for e in events:
        ms = "-" if e.duration_ms is None else f"{e.duration_ms:.1f}"
        clock = time.strftime("%H:%M:%S", time.localtime(e.at)) + f".{int(e.at % 1 * 1000):03d}"
        print(
            f"{e.seq:>4}  {clock:<12}  {e.kind:<10} {(e.name or '-')[:22]:<22} {ms:>9}  "
            f"{(e.error_class or '-'):<17} {_detail(e.payload)}"
        )


def _detail(payload: dict[str, Any]) -> str:
    parts = []
    for key, value in payload.items():
        shown = str(value).replace("\n", " ")
        if len(shown) > _DETAIL_CHARS:
            shown = shown[:_DETAIL_CHARS] + "…"
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _duration(started: float, ended: float | None) -> str:
    return "-" if ended is None else f"{ended - started:.1f} s"
