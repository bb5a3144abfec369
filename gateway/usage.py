"""Cost and periods: what a run's tokens cost at the price table's prices, and where the
current day and month begin in the configured timezone (budgets and ``/usage`` count from
there)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from gateway.runtime.model import Usage
from gateway.usage_settings import Price

__all__ = ["Periods", "cost_of", "format_cost", "format_tokens"]

_MILLION = 1_000_000


def cost_of(usage: Usage, price: Price | None) -> float | None:
    """The cost of ``usage`` at ``price`` (per million tokens); ``None`` without a price.

    Cached prompt tokens are part of ``usage.input_tokens``; they are priced at the cache
    prices (the input price when the table gives none), the rest of the input at ``input``.
    """
    if price is None:
        return None
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    fresh = max(0, usage.input_tokens - cached)
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    total = (
        fresh * price.input
        + usage.cache_read_tokens * read
        + usage.cache_write_tokens * write
        + usage.output_tokens * price.output
    )
    return total / _MILLION


@dataclass(frozen=True, slots=True)
class Periods:
    """The current day and month in a timezone: their start (epoch seconds) and their names."""

    day_start: float
    month_start: float
    day: str  # 2026-12-01
    month: str  # 2026-12

    @property
    def names(self) -> tuple[str, str]:
        """The day and the month, as the usage rollups name them."""
        return (self.day, self.month)

    @classmethod
    def at(cls, now: float, timezone: str) -> Periods:
        local = datetime.fromtimestamp(now, ZoneInfo(timezone))
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        month = day.replace(day=1)
        return cls(day.timestamp(), month.timestamp(), day.strftime("%Y-%m-%d"), day.strftime("%Y-%m"))


def format_tokens(tokens: int) -> str:
    return f"{tokens:,} tokens"


def format_cost(cost: float, currency: str) -> str:
    return f"{cost:,.4f} {currency}" if 0 < cost < 0.01 else f"{cost:,.2f} {currency}"
