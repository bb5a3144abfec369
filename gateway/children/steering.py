"""A background child's toolbox: its host tools, plus the steering its parent sends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from gateway.runtime.agent import ToolBox, ToolOutcome
from gateway.runtime.model import ToolCall, ToolSpec

__all__ = ["SteeredToolBox"]


class SteeredToolBox:
    """``inner``'s tools (:class:`gateway.runtime.agent.ToolBox`) and, at each tool-call
    boundary, ``take(latest_text)``: the steering messages waiting for the child
    (:class:`gateway.runtime.agent.Steered`)."""

    def __init__(self, inner: ToolBox, take: Callable[[str], Awaitable[Sequence[str]]]):
        self.inner = inner
        self._take = take

    def specs(self) -> Sequence[ToolSpec]:
        return self.inner.specs()

    async def call(self, call: ToolCall) -> ToolOutcome:
        return await self.inner.call(call)

    async def steering(self, latest_text: str) -> Sequence[str]:
        return await self._take(latest_text)

    def __getattr__(self, name: str) -> Any:
        # The inner toolbox's extras (RunToolBox.environment, close) stay reachable.
        return getattr(self.inner, name)
