"""The host tools: the ten tools of the reference, under their reference names.

``TOOLS`` is this family's rows of :mod:`tools.registry`, in listing order; ``instructions/``
holds the packaged instruction file of each capability prefix, ``<prefix>.md``.
"""

from __future__ import annotations

from tools.base import HostTool
from tools.host import (
    background_agent,
    channel_send,
    db_query,
    memory_access,
    net_http,
    persona_list,
    persona_send,
    persona_task_status,
    schedule_manage,
    subagent_invoke,
)

__all__ = ["TOOLS"]

TOOLS: tuple[HostTool, ...] = (
    channel_send.TOOL,
    memory_access.TOOL,
    db_query.TOOL,
    net_http.TOOL,
    schedule_manage.TOOL,
    subagent_invoke.TOOL,
    persona_send.TOOL,
    persona_task_status.TOOL,
    persona_list.TOOL,
    background_agent.TOOL,
)
