"""Import a heavy module when it is first needed, in a worker thread so the event loop keeps
serving meanwhile. Start-up imports only what the configuration uses."""

from __future__ import annotations

import asyncio
import importlib
import sys
from types import ModuleType

__all__ = ["import_off_loop"]


async def import_off_loop(name: str) -> ModuleType:
    """The module ``name``; imported in a thread unless it already is."""
    module = sys.modules.get(name)
    # A module another thread is still importing is in sys.modules half-built: wait for it.
    if module is not None and not getattr(module.__spec__, "_initializing", False):
        return module
    return await asyncio.to_thread(importlib.import_module, name)
