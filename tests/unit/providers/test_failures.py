"""Retries, give-ups, timeouts and unreadable responses through the real SDKs."""

from __future__ import annotations

import time

import pytest

from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError
from tests.fakes.model_api import Disconnect, Error, Malformed, Reply
from tests.unit.providers.conftest import Api


def ask(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(model="test-model", system="", messages=(ChatMessage("user", text),), **kwargs)


async def test_rate_limit_waits_for_retry_after(api: Api) -> None:
    api.fake.script(Error(429, retry_after=0.4), Reply(text="after the wait"))
    provider = api.provider(backoff_base=0.001)

    started = time.monotonic()
    response = await provider.complete(ask())

    assert time.monotonic() - started >= 0.4
    assert response.text == "after the wait"
    assert len(api.fake.requests) == 2


async def test_retry_after_is_capped(api: Api) -> None:
    api.fake.script(Error(429, retry_after=3600), Reply(text="soon"))
    provider = api.provider(retry_after_cap=0.05)

    started = time.monotonic()
    assert (await provider.complete(ask())).text == "soon"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retried(api: Api, status: int) -> None:
    api.fake.script(Error(status), Error(status), Reply(text="recovered"))

    response = await api.provider(max_retries=2).complete(ask())

    assert response.text == "recovered"
    assert len(api.fake.requests) == 3


async def test_overloaded_inside_the_stream_is_retried(api: Api) -> None:
    error = (
        Error(529, type="overloaded_error") if api.kind == "anthropic" else Error(503, type="server_error")
    )
    api.fake.script(Error(error.status, type=error.type, in_stream=True), Reply(text="recovered"))

    assert (await api.provider().complete(ask())).text == "recovered"


async def test_dropped_connection_is_retried(api: Api) -> None:
    api.fake.script(Disconnect(), Reply(text="recovered"))

    assert (await api.provider().complete(ask())).text == "recovered"
    assert len(api.fake.requests) == 2


async def test_retries_exhausted(api: Api) -> None:
    api.fake.script(*[Error(429, retry_after=0.05, message="slow down")] * 3)

    with pytest.raises(ProviderError) as caught:
        await api.provider(max_retries=2).complete(ask())

    assert caught.value.transient is True
    assert caught.value.retry_after == pytest.approx(0.05)
    assert "slow down" in str(caught.value)
    assert len(api.fake.requests) == 3


async def test_no_retries_when_configured_off(api: Api) -> None:
    api.fake.script(Error(503), Reply(text="never reached"))

    with pytest.raises(ProviderError) as caught:
        await api.provider(max_retries=0).complete(ask())

    assert caught.value.transient is True
    assert api.fake.pending == 1


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_client_errors_are_final(api: Api, status: int) -> None:
    api.fake.script(Error(status, message=f"the API says no ({status})"), Reply(text="never reached"))

    with pytest.raises(ProviderError) as caught:
        await api.provider().complete(ask())

    assert caught.value.transient is False
    assert f"the API says no ({status})" in str(caught.value)
    assert len(api.fake.requests) == 1


async def test_rejected_request_reports_the_api_message(api: Api) -> None:
    # A tool result whose call is not in the transcript: the API answers 400.
    orphan = ModelRequest(
        "test-model", "", (ChatMessage("user", "hi"), ChatMessage("tool", "42", tool_call_id="nope"))
    )

    with pytest.raises(ProviderError) as caught:
        await api.provider().complete(orphan)

    assert caught.value.transient is False
    expected = "unexpected `tool_use_id`" if api.kind == "anthropic" else "messages with role 'tool' must be"
    assert expected in str(caught.value)
    assert "HTTP 400" in str(caught.value)


@pytest.mark.parametrize("body", [None, "not an event stream at all"])
async def test_malformed_response(api: Api, body: str | None) -> None:
    api.fake.script(Malformed(body=body), Reply(text="never reached"))

    with pytest.raises(ProviderError) as caught:
        await api.provider().complete(ask())

    assert caught.value.transient is True
    assert "malformed response" in str(caught.value)


async def test_slow_model_times_out(api: Api) -> None:
    api.fake.script(Reply(text="too late", delay=3))

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await api.provider(timeout=0.3).complete(ask())

    assert time.monotonic() - started < 2
    assert caught.value.transient is True
    assert "0.3 s" in str(caught.value)


async def test_request_timeout_wins_when_smaller(api: Api) -> None:
    api.fake.script(Reply(chunks=["a", "b", "c", "d"], chunk_delay=0.5))

    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await api.provider(timeout=60).complete(ask(timeout=0.3))

    # A stream that keeps sending still ends at the deadline.
    assert time.monotonic() - started < 1.2
    assert caught.value.transient is True


async def test_no_retry_after_text_was_streamed(api: Api) -> None:
    api.fake.script(Disconnect(after_events=4), Reply(text="would repeat the start"))
    seen: list[str] = []

    async def on_text(delta: str) -> None:
        seen.append(delta)

    with pytest.raises(ProviderError) as caught:
        await api.provider().complete(ask(), on_text)

    assert caught.value.transient is True
    assert seen  # part of the reply was shown...
    assert api.fake.pending == 1  # ...so it was not fetched a second time


async def test_cut_stream_before_text_is_retried(api: Api) -> None:
    api.fake.script(Disconnect(after_events=1), Reply(text="whole"))

    assert (await api.provider().complete(ask())).text == "whole"
