"""Shared by the delegation tools: reaching the daemon's delegation service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.base import ToolContext

if TYPE_CHECKING:
    from gateway.delegation import Delegation


def delegation(ctx: ToolContext) -> Delegation:
    """The daemon's delegation service; its refusals reach the model through the bridge."""
    return ctx.require_services("delegation is not available in this session").delegation
