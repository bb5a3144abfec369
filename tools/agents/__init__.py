"""The child-agent tools: ``agent`` and ``compose`` (``agent.dispatch``), the background-job
tools (``jobs.manage``) and a child's ``emit_progress`` (``agent.progress``, granted only by
``progress_events``). The children themselves run in :mod:`gateway.children`. ``TOOLS`` is
this family's rows of :mod:`tools.registry`; ``instructions/`` holds their instruction files.
"""

from __future__ import annotations

from tools.agents import agent, compose, jobs
from tools.base import HostTool

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (agent.TOOL, compose.TOOL, jobs.CANCEL, jobs.HEALTH, jobs.STEER, jobs.PROGRESS)
