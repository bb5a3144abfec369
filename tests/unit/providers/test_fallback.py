"""Model fallback through the real SDKs: which failures move a call to the persona's next
model (unavailable: 408, 429, 5xx, 529 overloaded, a timeout, an error inside the stream)
and which never do (a refused request or key), and that streamed text stops a fallback."""

from __future__ import annotations

import pytest

from gateway.runtime.fallback import ModelChain, ModelChoice
from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError
from gateway.tracing import RunTrace
from tests.fakes.model_api import Disconnect, Error, Reply
from tests.unit.providers.conftest import Api


def ask() -> ModelRequest:
    return ModelRequest(model="ignored", system="", messages=(ChatMessage("user", "hi"),), timeout=5)


def chain(api: Api, trace: RunTrace | None = None, **settings: object) -> ModelChain:
    provider = api.provider(max_retries=0, **settings)
    choices = [ModelChoice("main:big", provider, "big"), ModelChoice("main:small", provider, "small")]
    return ModelChain(choices, trace=trace) if trace is not None else ModelChain(choices)


@pytest.mark.parametrize("status", [408, 429, 500, 503, 529])
async def test_an_unavailable_model_falls_back_to_the_next(api: Api, status: int) -> None:
    api.fake.script(Error(status), Reply(text="from the fallback"))
    models = chain(api)

    response = await models.complete(ask())

    assert response.text == "from the fallback"
    assert [body["model"] for body in api.fake.requests] == ["big", "small"]
    assert (models.answered, models.fallbacks, response.model) == ("main:small", 1, "small")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_a_refused_request_or_key_never_falls_back(api: Api, status: int) -> None:
    api.fake.script(Error(status), Reply(text="never asked"))
    models = chain(api)

    with pytest.raises(ProviderError) as raised:
        await models.complete(ask())

    assert f"HTTP {status}" in str(raised.value) and not raised.value.fallback
    assert [body["model"] for body in api.fake.requests] == ["big"]
    assert models.answered is None and models.fallbacks == 0


async def test_an_error_inside_the_stream_falls_back(api: Api) -> None:
    api.fake.script(Error(529, in_stream=True), Reply(text="second"))
    assert (await chain(api).complete(ask())).text == "second"


async def test_a_timeout_before_any_text_falls_back(api: Api) -> None:
    api.fake.script(Reply(text="too late", delay=2.0), Reply(text="quick"))
    models = chain(api, timeout=0.5)
    assert (await models.complete(ask())).text == "quick"
    assert models.fallbacks == 1


async def test_no_fallback_once_text_reached_the_chat(api: Api) -> None:
    api.fake.script(Disconnect(after_events=4), Reply(text="never asked"))
    shown: list[str] = []

    async def on_text(delta: str) -> None:
        shown.append(delta)

    with pytest.raises(ProviderError) as raised:
        await chain(api).complete(ask(), on_text)

    assert shown and not raised.value.fallback
    assert len(api.fake.requests) == 1


async def test_the_last_models_error_is_the_calls_and_each_fallback_is_traced(api: Api) -> None:
    api.fake.script(Error(529), Error(503))
    trace = RunTrace(1, persona="p", thread_id=1)
    with pytest.raises(ProviderError) as raised:
        await chain(api, trace).complete(ask())
    assert "HTTP 503" in str(raised.value)
    events = [e for e in trace.buffered() if e.name == "model_fallback"]
    assert [(e.payload["failed"], e.payload["next"]) for e in events] == [("main:big", "main:small")]


async def test_the_first_model_answers_when_it_can(api: Api) -> None:
    api.fake.script(Reply(text="first"))
    models = chain(api)
    response = await models.complete(ask())
    assert (response.text, response.model, models.answered, models.fallbacks) == (
        "first",
        None,
        "main:big",
        0,
    )
