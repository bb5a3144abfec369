"""What ``/usage`` answers in a chat: this conversation's and this sender's use today and
this month (tokens, and cost where the price table prices the models), and their budgets."""

from __future__ import annotations

import sqlite3
import time

from gateway.config import Settings
from gateway.store.db import Database
from gateway.store.messages import message_sender
from gateway.store.usage import UsageTotals, rollup_totals, usage_totals
from gateway.usage import Periods, format_cost, format_tokens

__all__ = ["usage_answer"]


def _line(label: str, used: UsageTotals, currency: str) -> str:
    cost = f", {format_cost(used.cost, currency)}" if used.cost > 0 else ""
    unpriced = f" ({used.unpriced} runs unpriced)" if used.unpriced and used.cost > 0 else ""
    return f"- {label}: {format_tokens(used.tokens)}{cost}{unpriced}"


async def usage_answer(
    db: Database, settings: Settings, thread_id: int, message_id: int | None, *, now: float | None = None
) -> str:
    """``/usage``'s answer for the command stored as ``message_id`` on ``thread_id``."""
    periods = Periods.at(time.time() if now is None else now, settings.timezone)

    def read(conn: sqlite3.Connection) -> tuple[str | None, list[UsageTotals]]:
        sender = message_sender(conn, message_id) if message_id is not None else None
        totals = [
            usage_totals(conn, since=periods.day_start, thread_id=thread_id),
            usage_totals(conn, since=periods.month_start, thread_id=thread_id),
        ]
        if sender is not None:
            totals += rollup_totals(conn, [("user", sender, periods.day), ("user", sender, periods.month)])
        return sender, totals

    sender, totals = await db.read(read)
    currency = settings.currency
    lines = [
        "Usage",
        "",
        _line(f"this conversation today ({periods.day})", totals[0], currency),
        _line(f"this conversation this month ({periods.month})", totals[1], currency),
    ]
    if sender is not None:
        lines += [_line("you today", totals[2], currency), _line("you this month", totals[3], currency)]
        limit = settings.budgets.per_user_day
        if limit is not None:
            if limit.tokens is not None:
                left = f"{format_tokens(max(0, limit.tokens - totals[2].tokens))} left of {format_tokens(limit.tokens)}"
            else:
                spent = limit.cost or 0.0
                left = f"{format_cost(max(0.0, spent - totals[2].cost), currency)} left of {format_cost(spent, currency)}"
            lines.append(f"- your daily budget: {left}")
    return "\n".join(lines)
