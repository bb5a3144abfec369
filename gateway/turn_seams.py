"""The seams of the turn runner: the tools a turn gets and the hooks that follow turns.

The daemon plugs the host tools (:class:`gateway.host_tools.HostTools`), the delegation and
child-agent services and the scheduler's results in here; the turn runner knows only these
protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from gateway.runtime.agent import NoTools, ToolBox

if TYPE_CHECKING:
    from gateway.budgets import RunBudget
    from gateway.personas import Persona
    from gateway.queue import Batch
    from gateway.store.threads import ThreadRow
    from gateway.tracing import RunTrace


class TurnTools(Protocol):
    """The plug-in point for tools: what a persona gets in a given turn."""

    def toolbox(
        self,
        persona: Persona,
        thread_id: int,
        run_id: int,
        *,
        sender_id: str | None = None,
        budget: RunBudget | None = None,
        trace: RunTrace | None = None,
        interactive: bool = False,
    ) -> ToolBox: ...

    def instructions(self, persona: Persona) -> Sequence[str]: ...

    def release(self, run_id: int) -> None: ...


class NoTurnTools:
    def toolbox(
        self,
        persona: Persona,
        thread_id: int,
        run_id: int,
        *,
        sender_id: str | None = None,
        budget: RunBudget | None = None,
        trace: RunTrace | None = None,
        interactive: bool = False,
    ) -> ToolBox:
        return NoTools()

    def instructions(self, persona: Persona) -> Sequence[str]:
        return ()

    def release(self, run_id: int) -> None:
        return None


class TurnHooks(Protocol):
    """Extensions that follow turns on their own threads (delegated tasks, background agents)."""

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        """The persona a turn on ``thread`` runs as (a profile may narrow its tools or change
        its provider) and a turn timeout other than the configured one (or None)."""

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None: ...

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        """``status``: completed, failed or canceled (``text`` is the reply when completed)."""


class ScheduleResults(Protocol):
    async def __call__(
        self, schedule_id: str, due_at: float, *, status: str, run_id: int | None, error: str | None
    ) -> None: ...
