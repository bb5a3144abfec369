"""A shell task's run: its command in the persona's workspace sandbox, once, with no model.

The sandbox is the ``bash`` tool's (:mod:`tools.workspace.sandbox`): ``/workspace`` is the
task's conversation folder, ``/shared`` the persona's when its labels mount it. The command
gets the ``bash`` tool's longest foreground time; killed at that limit (or for flooding its
output) the run has failed, and it is not retried: a command that ran too long would only run
too long again. The persona must still hold ``shell.exec:sandbox`` when the task fires.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gateway.labels import check
from gateway.scheduling.outcomes import ShellOutcome
from gateway.store.db import Database
from gateway.store.schedules import ScheduleRow
from tools.base import ToolContext, ToolError
from tools.workspace import process
from tools.workspace.sandbox import sandboxed_command
from tools.workspace.shell import MAX_TIMEOUT_MS
from tools.workspace.shell import TOOL as BASH

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona

__all__ = ["SHELL_TIMEOUT", "ShellScheduleRunner"]

SHELL_TIMEOUT = MAX_TIMEOUT_MS / 1000


class ShellScheduleRunner:
    """The daemon's :class:`gateway.scheduling.outcomes.ShellRunner`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        personas: Mapping[str, Persona],
        *,
        timeout: float = SHELL_TIMEOUT,
    ) -> None:
        self.db = db
        self.settings = settings
        self.personas = personas
        self.timeout = timeout

    async def __call__(self, row: ScheduleRow) -> ShellOutcome:
        persona = self.personas.get(row.persona)
        if persona is None:
            return ShellOutcome(None, 0, "", f"persona {row.persona!r} is not configured")
        if not check(persona.capabilities, BASH, {}).allowed:
            return ShellOutcome(None, 0, "", f"persona {row.persona!r} no longer holds shell.exec:sandbox")
        if not row.prompt:
            return ShellOutcome(None, 0, "", "the task has no command")
        command = row.prompt if not row.cwd else f"cd -- {shlex.quote(row.cwd)} || exit 1\n{row.prompt}"
        ctx = ToolContext(thread_id=row.thread_id, persona=persona, db=self.db, settings=self.settings)
        try:
            sandboxed = sandboxed_command(ctx, command)
        except ToolError as exc:
            return ShellOutcome(None, 0, "", str(exc))
        done = await process.run_captured(sandboxed, self.timeout)
        output = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
        error = None
        if done.timed_out:
            error = f"killed at the {self.timeout:g} s time limit (not retried)"
        elif done.output_limit:
            error = "killed for writing more than 8 MB of output; redirect it to a file"
        return ShellOutcome(done.exit_code, done.duration_ms, output, error)
