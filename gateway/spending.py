"""Spending budgets: a turn over its sender's, persona's or channel's budget is refused, and
the operator hears once per period when one passes its notice share (80%).

The check runs in the turn before the first model call (:meth:`Spending.check`): one read of
at most three indexed sums over ``runs``, skipped entirely when no budget is configured. A
refused turn makes no model call; its messages stay stored, and the user is told which
budget is spent and when it renews. After a turn is committed, :meth:`Spending.after_turn`
reads the same sums again and posts each notice that is due to the operator's chat
(``operator`` in talon.yaml), remembering it in ``budget_notices`` so it goes out once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.config import Settings
from gateway.personas import Persona
from gateway.runtime.agent import TurnResult
from gateway.store.children import Payer
from gateway.store.db import Database
from gateway.store.runs import RunSpend
from gateway.store.usage import UsageTotals, mark_notice, rollup_totals
from gateway.usage import Periods, cost_of, format_cost, format_tokens
from gateway.usage_settings import SpendLimit

__all__ = ["BudgetState", "Spending", "run_spend"]

log = logging.getLogger("talon.spending")

_WHAT = {
    "per_user_day": ("your daily budget", "today", "tomorrow"),
    "per_persona_month": ("this assistant's monthly budget", "this month", "next month"),
    "per_channel_day": ("this channel's daily budget", "today", "tomorrow"),
}


@dataclass(frozen=True, slots=True)
class BudgetState:
    """One budget as it stands: which, for whom, in which period, its limit and its use."""

    budget: str  # per_user_day | per_persona_month | per_channel_day
    subject: str
    period: str
    limit: SpendLimit
    used: UsageTotals

    @property
    def share(self) -> float:
        if self.limit.tokens is not None:
            return self.used.tokens / self.limit.tokens
        return self.used.cost / (self.limit.cost or 1.0)

    def measure(self, currency: str) -> str:
        """The limit in words: ``200,000 tokens`` or ``5.00 USD``."""
        if self.limit.tokens is not None:
            return format_tokens(self.limit.tokens)
        return format_cost(self.limit.cost or 0.0, currency)

    def refusal(self, currency: str) -> str:
        """What the user reads when a turn is refused."""
        what, now, renews = _WHAT[self.budget]
        return (
            f"Sorry, I can't answer right now: {what} of {self.measure(currency)} is used up {now}. "
            f"Your message is saved; ask again {renews}, or ask the operator to raise the budget."
        )

    def notice(self, currency: str) -> str:
        """What the operator reads when the budget passes its notice share."""
        used = (
            format_tokens(self.used.tokens)
            if self.limit.tokens is not None
            else format_cost(self.used.cost, currency)
        )
        return (
            f"Budget notice: {self.budget} for {self.subject} ({self.period}) is at {self.share:.0%}: "
            f"{used} of {self.measure(currency)}. Turns are refused at 100%."
        )


class Spending:
    """Budgets of talon.yaml's ``budgets``, checked against the ``runs`` table.

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        settings (:class:`gateway.config.Settings`): ``budgets``, ``currency``, ``timezone``, ``operator``.
        notify (Callable, optional): Posts to a channel's chat (:meth:`gateway.poster.ChannelPoster.notify`).
        clock (Callable[[], :obj:`float`], optional): Epoch seconds (tests pass their own).
    """

    def __init__(
        self,
        db: Database,
        settings: Settings,
        notify: Callable[[str, str | None, str], Awaitable[object]] | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ):
        self.db = db
        self.settings = settings
        self.budgets = settings.budgets
        self.notify = notify
        self.clock = clock

    async def check(self, persona: str, channel: str, senders: Sequence[str]) -> BudgetState | None:
        """The first budget this turn would start over (spent: at or past 100%), or ``None``."""
        if not self.budgets.any:
            return None
        for state in await self.states(persona, channel, senders):
            if state.share >= 1.0:
                log.info(
                    "refusing a turn: %s for %s is spent (%.0f%%)",
                    state.budget,
                    state.subject,
                    state.share * 100,
                )
                return state
        return None

    async def after_turn(self, persona: str, channel: str, senders: Sequence[str]) -> None:
        """Tell the operator of each budget that passed its notice share, once per period."""
        if not self.budgets.any:
            return
        try:
            for state in await self.states(persona, channel, senders):
                if state.share >= self.budgets.notice_share:
                    await self._notice(state)
        except Exception:
            # The turn is committed either way; a lost notice must not fail it.
            log.warning("could not check or send a budget notice", exc_info=True)

    async def states(self, persona: str, channel: str, senders: Sequence[str]) -> list[BudgetState]:
        """Every configured budget that applies to this turn, with its use so far (from the
        usage rollups: one key lookup per budget)."""
        periods = Periods.at(self.clock(), self.settings.timezone)
        budgets = self.budgets
        wanted: list[tuple[str, str, str, str, SpendLimit]] = []  # budget, scope, subject, period, limit
        if budgets.per_user_day is not None:
            wanted += [("per_user_day", "user", s, periods.day, budgets.per_user_day) for s in senders]
        if budgets.per_persona_month is not None:
            wanted.append(("per_persona_month", "persona", persona, periods.month, budgets.per_persona_month))
        if budgets.per_channel_day is not None:
            wanted.append(("per_channel_day", "channel", channel, periods.day, budgets.per_channel_day))
        if not wanted:
            return []
        used = await self.db.read(
            rollup_totals, [(scope, subject, period) for _, scope, subject, period, _ in wanted]
        )
        return [
            BudgetState(budget, subject, period, limit, u)
            for (budget, _, subject, period, limit), u in zip(wanted, used, strict=True)
        ]

    async def _notice(self, state: BudgetState) -> None:
        fresh = await self.db.run_transaction(
            mark_notice, state.budget, state.subject, state.period, self.clock()
        )
        if not fresh:
            return
        text = state.notice(self.settings.currency)
        log.warning("%s", text)
        operator = self.settings.operator
        if operator.channel is None or self.notify is None:
            return
        await self.notify(operator.channel, operator.chat, text)


def run_spend(
    settings: Settings,
    result: TurnResult,
    persona: Persona,
    channel: str,
    sender: str | None,
    now: float,
    *,
    payer: Payer | None = None,
) -> RunSpend:
    """What a turn's run stores besides its tokens: its cost at today's price of the model that
    answered, whom it answered, its fallbacks, and the day and month its usage counts for.
    A child's run (``payer``) counts for its root turn's persona, channel and sender."""
    model = result.model or persona.model_ref
    return RunSpend(
        cache_read_tokens=result.usage.cache_read_tokens,
        cache_write_tokens=result.usage.cache_write_tokens,
        cost=cost_of(result.usage, settings.prices.get(model)),
        currency=settings.currency,
        sender_id=payer.sender if payer is not None else sender,
        channel=payer.channel if payer is not None else channel,
        fallbacks=result.fallbacks,
        persona=(payer.persona if payer is not None else None) or persona.name,
        periods=Periods.at(now, settings.timezone).names,
    )
