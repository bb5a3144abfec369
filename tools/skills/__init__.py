"""Skills and procedures.

``skill`` (label ``skill.use``) loads a skill the persona may use (:mod:`gateway.skills`);
``procedure_write`` (any ``memory.access`` label, like the other memory tools, whose
instruction file :mod:`tools.host` ships) saves a procedure as a skill draft that an operator
approves with ``talon skills approve``. ``instructions/`` holds ``skill.use.md``.
"""

from __future__ import annotations

from tools.base import HostTool
from tools.skills import procedure_write, skill

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (skill.TOOL, procedure_write.TOOL)
