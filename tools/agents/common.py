"""Shared by the child-agent tools: the daemon's child service and the root run's budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.base import ToolContext

if TYPE_CHECKING:
    from gateway.children.service import Children


def children(ctx: ToolContext) -> Children:
    """The daemon's child-agent service; its refusals reach the model through the bridge."""
    return ctx.require_services("child agents are not available in this session").children


def admit_child(ctx: ToolContext) -> None:
    """Count one more child against the root run's budget (refused when it is spent)."""
    if ctx.budget is not None:
        ctx.budget.admit_child()
