"""Model providers: one class per API, built from ``providers.<name>`` in talon.yaml.

Each fills the template of :class:`~gateway.runtime.providers.streaming.StreamingProvider`
with its API's wire details.

The SDKs take seconds to import, so :func:`build_provider` returns a :class:`LazyProvider`
that imports its SDK off the event loop on first use (or on :meth:`LazyProvider.warm_up`,
which the daemon calls right after it is ready). ``talon run`` is ready before that.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.backoff import Backoff
from gateway.config import ProviderSettings
from gateway.lazy_import import import_off_loop
from gateway.runtime.model import ModelProvider, ModelRequest, ModelResponse, TextDelta
from gateway.runtime.providers.retry import MODEL_CALL_BACKOFF, missing_key_error

__all__ = ["LazyProvider", "build_provider"]

_CLASSES = {
    "anthropic": ("gateway.runtime.providers.anthropic_provider", "AnthropicProvider"),
    "openai": ("gateway.runtime.providers.openai_provider", "OpenAIProvider"),
}

# Types whose client cannot be built without an API key (an OpenAI-compatible server may need none).
_KEY_REQUIRED = frozenset({"anthropic"})


class LazyProvider:
    """A provider whose SDK is imported when first needed."""

    def __init__(self, name: str, settings: ProviderSettings, **options: Any):
        if settings.type not in _CLASSES:
            raise ValueError(
                f"providers.{name}.type: unknown provider type {settings.type!r}; use anthropic or openai"
            )
        self.name = name
        self.settings = settings
        self._options = options
        self._real: ModelProvider | None = None
        self._lock = asyncio.Lock()

    async def warm_up(self) -> ModelProvider:
        async with self._lock:
            if self._real is None:
                module_name, class_name = _CLASSES[self.settings.type]
                module = await import_off_loop(module_name)
                self._real = getattr(module, class_name)(self.name, self.settings, **self._options)
            return self._real

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        if self._real is None and self.settings.type in _KEY_REQUIRED and not self.settings.api_key:
            raise missing_key_error(self.name, self.settings.type)  # as the SDK's class would, without it
        real = self._real or await self.warm_up()
        return await real.complete(request, on_text)

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()


def build_provider(
    name: str,
    settings: ProviderSettings,
    *,
    backoff: Backoff = MODEL_CALL_BACKOFF,
    retry_after_cap: float = 60.0,
) -> LazyProvider:
    """Build the provider ``settings.type`` names.

    Args:
        name (:obj:`str`): The key under ``providers`` in talon.yaml; errors name it.
        settings (:class:`~gateway.config.ProviderSettings`): Its settings.
        backoff (:class:`~gateway.backoff.Backoff`, optional): Retry delays without
            ``retry-after`` (tests make them tiny).
        retry_after_cap (:obj:`float`, optional): Longest wait honoured from ``retry-after``.

    Raises:
        :exc:`ValueError`: For a ``type`` no provider implements.
    """
    return LazyProvider(name, settings, backoff=backoff, retry_after_cap=retry_after_cap)
