"""Model providers: one class per API, built from ``providers.<name>`` in talon.yaml."""

from __future__ import annotations

from gateway.config import ProviderSettings
from gateway.runtime.model import ModelProvider
from gateway.runtime.providers.anthropic_provider import AnthropicProvider
from gateway.runtime.providers.openai_provider import OpenAIProvider

__all__ = ["AnthropicProvider", "OpenAIProvider", "build_provider"]


def build_provider(
    name: str,
    settings: ProviderSettings,
    *,
    backoff_base: float = 0.5,
    retry_after_cap: float = 60.0,
) -> ModelProvider:
    """Build the provider ``settings.type`` names.

    Args:
        name (:obj:`str`): The key under ``providers`` in talon.yaml; errors name it.
        settings (:class:`~gateway.config.ProviderSettings`): Its settings.
        backoff_base (:obj:`float`, optional): First retry delay without ``retry-after``
            (tests make it tiny).
        retry_after_cap (:obj:`float`, optional): Longest wait honoured from ``retry-after``.

    Raises:
        :exc:`ValueError`: For a ``type`` no provider implements.
    """
    if settings.type == "anthropic":
        return AnthropicProvider(name, settings, backoff_base=backoff_base, retry_after_cap=retry_after_cap)
    if settings.type == "openai":
        return OpenAIProvider(name, settings, backoff_base=backoff_base, retry_after_cap=retry_after_cap)
    raise ValueError(
        f"providers.{name}.type: unknown provider type {settings.type!r}; use anthropic or openai"
    )
