"""Shared by the delegation tools: reaching the daemon's delegation service."""

from __future__ import annotations

from typing import Any

from tools.base import ToolContext, ToolError


def delegation(ctx: ToolContext) -> Any:
    """The daemon's :class:`gateway.delegation.Delegation` (``ctx.services.delegation``)."""
    service = getattr(ctx.services, "delegation", None)
    if service is None:
        raise ToolError("delegation is not available in this session")
    return service


async def guarded(call: Any) -> Any:
    """Run a service call, turning its refusals into errors the model sees."""
    from gateway.delegation import DelegationError

    try:
        return await call
    except DelegationError as exc:
        raise ToolError(str(exc)) from None
