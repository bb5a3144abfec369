"""The full schedule tools: ``create_schedule``, ``update_schedule``, ``list_schedules``,
``get_schedule_history`` and ``cancel_schedule``, all under ``schedule.manage:own``.

They keep their tasks in the same ``schedules`` table as ``schedule_manage`` and are fired by
the same scheduler (:mod:`gateway.scheduler`); ``shell_runner`` runs a shell task's command
in the workspace sandbox. The label's instruction file ships with ``tools.host``, whose
``schedule_manage`` shares the prefix (one family ships each file).
"""

from __future__ import annotations

from tools.base import HostTool
from tools.schedules import managing, writing

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (
    writing.CREATE,
    writing.UPDATE,
    managing.LIST,
    managing.HISTORY,
    managing.CANCEL,
)
