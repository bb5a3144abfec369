"""The memory tools beyond ``memory_access``: ranked search and scoped facts and hot memory.

``memory_search`` and ``memory_update`` carry the ``memory.access`` prefix, like
``memory_access`` (:mod:`tools.host`), whose family ships that prefix's instruction file;
the label's scope words decide which memory a call reaches (:mod:`tools.memory.common`).
"""

from __future__ import annotations

from tools.base import HostTool
from tools.memory import memory_search, memory_update

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (memory_search.TOOL, memory_update.TOOL)
