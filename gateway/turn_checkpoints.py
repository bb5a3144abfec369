"""A turn's checkpoints: saved before a call that may wait for a human, dropped when it ends.

A turn saves its state before such a call (:func:`gateway.store.interactions.save_checkpoint`),
with its batch pointed at its run, so that after a restart the run resumes there. When the
turn ends, the checkpoints of its thread's runs are dropped. Only a turn that saved one, or
whose batch an earlier attempt pointed at its run, can have any, so other turns end without
a transaction for them.
"""

from __future__ import annotations

import time

from gateway.personas import Persona
from gateway.queue import Batch
from gateway.runtime.checkpoints import Suspended, to_state
from gateway.store.db import Database
from gateway.store.interactions import drop_checkpoints, save_checkpoint
from gateway.store.threads import ThreadRow

__all__ = ["TurnCheckpoints"]


class TurnCheckpoints:
    """Saves a turn's checkpoints and, as the last of its turn hooks, drops them at its end."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._saved: set[int] = set()  # threads whose running turn saved a checkpoint

    async def save(self, run_id: int, batch: Batch, state: Suspended) -> None:
        self._saved.add(batch.thread_id)
        await self.db.run_transaction(
            save_checkpoint, run_id, batch.thread_id, to_state(state), batch.ids, time.time()
        )

    async def prepare(self, thread: ThreadRow, persona: Persona) -> tuple[Persona, float | None]:
        return persona, None

    async def turn_started(self, thread: ThreadRow, batch: Batch, run_id: int) -> None:
        return None

    async def turn_ended(
        self, thread: ThreadRow, batch: Batch, status: str, text: str, error: str | None
    ) -> None:
        saved = batch.thread_id in self._saved
        self._saved.discard(batch.thread_id)
        if saved or batch.kept_run is not None:
            await self.db.run_transaction(drop_checkpoints, batch.thread_id)
