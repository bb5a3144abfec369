"""Fixtures for the sub-agent tests: a database and stand-in Anthropic/OpenAI servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway.store.db import Database, open_database
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI
from tests.unit.subagents.support import Env, make_env


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
async def openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Callable[..., Env]]:
    """``make(fakes, **options)``: a runner over ``tmp_path`` (closed after the test)."""
    envs: list[Env] = []

    def build(fakes: Mapping[str, FakeAnthropic | FakeOpenAI], **options: Any) -> Env:
        env = make_env(tmp_path, fakes, **options)
        envs.append(env)
        return env

    yield build
    for env in envs:
        await env.aclose()


@pytest.fixture
async def env(make: Callable[..., Env], anthropic: FakeAnthropic, openai: FakeOpenAI) -> Env:
    """The built-ins on their default providers: ``anthropic`` and ``openai``."""
    return make({"anthropic": anthropic, "openai": openai})
