"""``model_complete`` (label ``model.complete``): one prompt to a configured model, no tools.
``instructions/`` holds ``model.complete.md``."""

from __future__ import annotations

from tools.base import HostTool
from tools.model_call import model_complete

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (model_complete.TOOL,)
