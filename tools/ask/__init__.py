"""Asking the humans in the chat: ``ask_question`` and ``exit_plan_mode``, both under ``chat.ask``.

A question or a plan is posted with buttons (numbered choices where the platform has none) and
the turn waits for the answer without holding a worker slot (:mod:`gateway.interactions`).
Runs without a human to answer (schedules, background jobs, child agents) get
``{"action": "decline"}`` at once. ``TOOLS`` is this family's rows of :mod:`tools.registry`;
``instructions/chat.ask.md`` is its instruction file.
"""

from __future__ import annotations

from tools.ask import plan, question
from tools.base import HostTool

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (question.TOOL, plan.TOOL)
