"""Both providers against their stand-in servers: ``api`` runs a test once per provider type."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.backoff import Backoff
from gateway.config import ProviderSettings
from gateway.runtime.model import ModelProvider
from gateway.runtime.providers import build_provider
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI


@dataclass
class Api:
    """A running stand-in plus a factory for providers pointed at it."""

    kind: str
    fake: FakeAnthropic | FakeOpenAI
    providers: list[ModelProvider]

    def provider(
        self, *, backoff_base: float = 0.01, retry_after_cap: float = 60.0, **settings: Any
    ) -> ModelProvider:
        fields: dict[str, Any] = {"type": self.kind, "api_key": "test-key", "base_url": self.fake.base_url}
        fields.update(settings)
        provider = build_provider(
            "main",
            ProviderSettings(**fields),
            backoff=Backoff(base=backoff_base, max=30.0),
            retry_after_cap=retry_after_cap,
        )
        self.providers.append(provider)
        return provider


@pytest.fixture(params=["anthropic", "openai"])
async def api(request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    fake = FakeAnthropic() if request.param == "anthropic" else FakeOpenAI()
    async with fake:
        handle = Api(request.param, fake, [])
        try:
            yield handle
        finally:
            for provider in handle.providers:
                await provider.aclose()
