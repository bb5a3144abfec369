"""The self-inspection tools (label ``runtime.inspect``): ``get_runtime_state``, ``get_facet``,
``read_witness``, ``search_witness`` and ``config_get``.

They read this run's identity, the run traces of :mod:`gateway.tracing` (a persona sees only
its own runs) and the loaded configuration with its secrets masked; none of them writes or
reaches the network. ``config_set`` is not offered: operators change the files.
``TOOLS`` is this family's rows of :mod:`tools.registry`; ``instructions/`` holds
``runtime.inspect.md``.
"""

from __future__ import annotations

from tools.base import HostTool
from tools.inspect import config_view, facet, runtime_state, witness

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (runtime_state.TOOL, facet.TOOL, witness.READ, witness.SEARCH, config_view.TOOL)
