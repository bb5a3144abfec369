"""The versioned state tools: JSON documents with a version, by namespace and key.

``state_get`` and ``state_query`` need ``state.read:persona|team``; ``state_put``,
``state_cas`` and ``state_delete`` need ``state.write:persona|team``. The documents live in
the store (:mod:`gateway.store.state`) and survive restarts. ``TOOLS`` is this family's rows
of :mod:`tools.registry`; ``instructions/`` holds ``state.read.md`` and ``state.write.md``.
"""

from __future__ import annotations

from tools.base import HostTool
from tools.state import reading, writing

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (reading.GET, reading.QUERY, writing.PUT, writing.CAS, writing.DELETE)
