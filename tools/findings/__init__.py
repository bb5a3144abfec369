"""Shared findings within one delegation tree (label ``workspace.share``): ``workspace_publish``,
``workspace_query`` and, for child agents only, ``workspace_subscribe``. Entries live in the store
(:mod:`gateway.store.findings`), keyed by the tree's root run. ``instructions/`` holds
``workspace.share.md``."""

from __future__ import annotations

from tools.base import HostTool
from tools.findings import publish, query

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (publish.TOOL, query.QUERY, query.SUBSCRIBE)
