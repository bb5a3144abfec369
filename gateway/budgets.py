"""Budgets of one root run: tool rounds, children, tokens and wall time.

A :class:`RunBudget` is made per root run (a chat turn, a scheduled turn) from the persona's
``budgets`` (persona.yaml) and shared by everything that run starts in process: the agent
loop, its child agents and compose nodes. It travels on :attr:`tools.base.ToolContext.budget`
(through the bridge's :class:`tools.bridge.RunIdentity`), so a tool that starts children can
reach it:

- ``budget.admit_child()`` before starting a child: counts it, or raises
  :class:`ChildBudgetError` (a :class:`gateway.errors.RefusedError`, the model sees the
  message) when ``max_children`` children were already started;
- ``budget.charge(usage)`` after every model call of the run or of a child, with the call's
  :class:`gateway.runtime.model.Usage`;
- ``budget.exhausted()`` at a round boundary: the :class:`BudgetLimit` that ran out, or ``None``.

Running out never ends a run abruptly: the agent loop makes one last model call whose tools
are not run, with :meth:`BudgetLimit.system_note` in its system prompt, and the reply carries
:meth:`BudgetLimit.user_notice`, so the user always gets an answer and a reason.

The defaults are deliberately generous for one chat turn and tight for a runaway tree:
50 tool rounds (a turn alone makes at most ``agent.max_turns`` model calls, 12 by default, so
the rest is room for children), 10 children, 400,000 tokens (about twelve model calls with a
full 32k-token transcript) and 480 s of wall time (the turn's hard limit ``agent.turn_timeout``
is 600 s: the wind-down call gets two minutes before it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.errors import RefusedError
from gateway.runtime.model import Usage

__all__ = [
    "DEFAULT_LIMITS",
    "BudgetExceededError",
    "BudgetLimit",
    "BudgetLimits",
    "ChildBudgetError",
    "RunBudget",
]


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """A persona's budgets (``budgets`` in persona.yaml)."""

    max_tool_rounds: int = 50
    max_children: int = 10
    max_tokens: int = 400_000
    max_wall_seconds: float = 480.0


DEFAULT_LIMITS = BudgetLimits()


@dataclass(frozen=True, slots=True)
class BudgetLimit:
    """The budget that ran out: its name (a :class:`BudgetLimits` field), limit and use."""

    name: str
    limit: float
    used: float

    @property
    def what(self) -> str:
        """The budget in words."""
        if self.name == "max_tool_rounds":
            return f"{self.limit:g} tool rounds"
        if self.name == "max_tokens":
            return f"{self.limit:,.0f} tokens"
        if self.name == "max_wall_seconds":
            return f"{self.limit:g} seconds"
        return f"{self.limit:g} child agents"

    def system_note(self) -> str:
        """What the model reads before its last call."""
        return (
            f"[budget] This run has used its budget of {self.what} ({self.name}). Tools are no longer "
            "run: any tool call you make now is ignored. Answer the user now with what you have, say "
            "briefly what is unfinished, and that they can ask you to continue."
        )

    def user_notice(self) -> str:
        """The line the reply ends with."""
        return f"(Stopped early: this run used its budget of {self.what}.)"


class BudgetExceededError(RefusedError):
    """A budget of the run is spent; the message names it."""

    def __init__(self, limit: BudgetLimit, message: str):
        super().__init__(message)
        self.limit = limit


class ChildBudgetError(BudgetExceededError):
    """``max_children`` children were already started in this run."""


class RunBudget:
    """The accounting of one root run and its in-process children.

    Args:
        limits (:class:`BudgetLimits`): The persona's budgets.
        clock (Callable[[], :obj:`float`], optional): Monotonic seconds (tests pass their own).
    """

    def __init__(self, limits: BudgetLimits = DEFAULT_LIMITS, *, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self.started = clock()
        self.tool_rounds = 0
        self.children = 0
        self.input_tokens = 0
        self.output_tokens = 0

    @property
    def tokens(self) -> int:
        """Tokens in and out of every model call charged so far."""
        return self.input_tokens + self.output_tokens

    @property
    def elapsed(self) -> float:
        """Seconds since the run began."""
        return self._clock() - self.started

    def charge(self, usage: Usage) -> None:
        """Count one model call's tokens (the run's or a child's)."""
        self.input_tokens += max(0, usage.input_tokens)
        self.output_tokens += max(0, usage.output_tokens)

    def round_done(self) -> None:
        """Count one tool round: a model response whose tool calls were run."""
        self.tool_rounds += 1

    def admit_child(self) -> None:
        """Count a child about to start.

        Raises:
            :class:`ChildBudgetError`: ``max_children`` children were already started; the
                message tells the model to finish with what it has.
        """
        limit = self.limits.max_children
        if self.children >= limit:
            spent = BudgetLimit("max_children", limit, self.children)
            raise ChildBudgetError(
                spent,
                f"this run has already started {self.children} child agents, its budget (max_children "
                f"{limit}); do the remaining work yourself or answer with what the children found",
            )
        self.children += 1

    def exhausted(self) -> BudgetLimit | None:
        """The first budget that ran out (tool rounds, tokens, wall time), or ``None``."""
        limits = self.limits
        if self.tool_rounds >= limits.max_tool_rounds:
            return BudgetLimit("max_tool_rounds", limits.max_tool_rounds, self.tool_rounds)
        if self.tokens >= limits.max_tokens:
            return BudgetLimit("max_tokens", limits.max_tokens, self.tokens)
        elapsed = self.elapsed
        if elapsed >= limits.max_wall_seconds:
            return BudgetLimit("max_wall_seconds", limits.max_wall_seconds, round(elapsed, 1))
        return None

    def snapshot(self) -> dict[str, float | int]:
        """What was used so far, for traces and self-inspection."""
        return {
            "tool_rounds": self.tool_rounds,
            "children": self.children,
            "tokens": self.tokens,
            "elapsed_seconds": round(self.elapsed, 3),
        }
