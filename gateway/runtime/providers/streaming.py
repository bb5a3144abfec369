"""The template every model provider fills: one streamed call, retried, with errors mapped.

:class:`StreamingProvider` owns what does not depend on the API: the retry policy and the
deadline (:func:`~gateway.runtime.providers.retry.run_with_retries`), the stream loop that
passes text to ``on_text`` as it arrives, the transport and JSON errors every SDK lets
through, and closing the client. A provider adds its wire details only: the SDK client,
the request body, how the stream is opened, how its events fold into a
:class:`~gateway.runtime.model.ModelResponse`, and how its SDK's exceptions map to a retry
or a final error.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx2
import pydantic

from gateway.backoff import Backoff
from gateway.config import ProviderSettings
from gateway.runtime.model import ModelRequest, ModelResponse, TextDelta
from gateway.runtime.providers.retry import (
    MODEL_CALL_BACKOFF,
    RetryableError,
    RetryPolicy,
    StreamTracker,
    malformed_response,
    missing_key_error,
    run_with_retries,
)

__all__ = ["EventStream", "SDKClient", "StreamAccumulator", "StreamingProvider"]


class SDKClient(Protocol):
    """An SDK's async client: all the template needs of it is closing it."""

    async def close(self) -> None: ...


class EventStream(Protocol):
    """An SDK's open server-sent-event stream."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


class StreamAccumulator(Protocol):
    """Folds one API's stream events into one response."""

    def feed(self, event: Any) -> str:
        """Take one event; return the text to stream to the caller now, if any."""

    def finish(self) -> str:
        """The stream ended: flush what is held back; return the text still to stream."""

    def result(self, provider: str) -> ModelResponse:
        """The whole response; raises when the stream was empty or ended early."""


ClientT = TypeVar("ClientT", bound=SDKClient)


class StreamingProvider(ABC, Generic[ClientT]):
    """A configured provider whose every call streams.

    The SDK's own retries are off (a subclass builds its client with ``max_retries=0``);
    :func:`~gateway.runtime.providers.retry.run_with_retries` retries 429, 5xx, the API's
    "overloaded" errors and connection errors instead, and gives up once text has reached
    ``on_text``.

    Args:
        name (:obj:`str`): The key under ``providers`` in talon.yaml.
        settings (:class:`~gateway.config.ProviderSettings`): ``api_key``, ``base_url``,
            ``timeout``, ``max_retries``.
        backoff (:class:`~gateway.backoff.Backoff`, optional): Retry delays without ``retry-after``.
        retry_after_cap (:obj:`float`, optional): Longest wait honoured from ``retry-after``.
    """

    kind: ClassVar[str]
    """The ``type`` in talon.yaml, naming the environment variable of a missing key."""
    sdk_error: ClassVar[type[Exception]]
    """The base class of the SDK's exceptions, which :meth:`_map_sdk_error` maps."""

    def __init__(
        self,
        name: str,
        settings: ProviderSettings,
        *,
        backoff: Backoff = MODEL_CALL_BACKOFF,
        retry_after_cap: float = 60.0,
    ) -> None:
        self.name = name
        self.settings = settings
        self._timeout = settings.timeout
        self._policy = RetryPolicy(
            max_retries=settings.max_retries, backoff=backoff, retry_after_cap=retry_after_cap
        )
        self._client: ClientT | None = self._make_client(settings)

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        """Stream one model call and return the whole response.

        Raises:
            :class:`~gateway.runtime.model.ProviderError`: See
            :func:`~gateway.runtime.providers.retry.run_with_retries`; also when the
            settings held no ``api_key`` to build the client with.
        """
        client = self._client
        if client is None:
            raise missing_key_error(self.name, self.kind)
        params = self._build_params(request)
        tracker = StreamTracker()

        async def attempt(remaining: float) -> ModelResponse:
            return await self._attempt(client, params, remaining, on_text, tracker)

        return await run_with_retries(
            attempt,
            self._policy,
            provider=self.name,
            timeout=min(self._timeout, request.timeout),
            tracker=tracker,
        )

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        if self._client is not None:
            await self._client.close()

    async def _attempt(
        self,
        client: ClientT,
        params: dict[str, Any],
        remaining: float,
        on_text: TextDelta | None,
        tracker: StreamTracker,
    ) -> ModelResponse:
        acc = self._accumulator()
        try:
            stream = await self._open_stream(client, params, remaining)
            try:
                async for event in stream:
                    text = acc.feed(event)
                    if text and on_text is not None:
                        tracker.started = True
                        await on_text(text)
                tail = acc.finish()
                if tail and on_text is not None:
                    tracker.started = True
                    await on_text(tail)
            finally:
                await stream.close()
        except httpx2.TimeoutException:
            raise TimeoutError from None  # the shared loop reports it with the configured timeout
        except httpx2.TransportError as exc:
            raise self._connection_failed(exc) from None
        except (json.JSONDecodeError, pydantic.ValidationError) as exc:
            detail = f"invalid JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise malformed_response(self.name, detail) from None
        except self.sdk_error as exc:
            raise self._map_sdk_error(exc) from None
        return acc.result(self.name)

    def _connection_failed(self, exc: Exception) -> RetryableError:
        return RetryableError(f"model provider {self.name!r}: connection failed: {exc}")

    @abstractmethod
    def _make_client(self, settings: ProviderSettings) -> ClientT | None:
        """The SDK client, built with ``max_retries=0``; :obj:`None` when ``settings`` lack
        what the SDK needs (calls then fail with an error naming the key)."""

    @abstractmethod
    def _build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The request body for ``request``."""

    @abstractmethod
    async def _open_stream(self, client: ClientT, params: dict[str, Any], remaining: float) -> EventStream:
        """Send ``params`` and return the open event stream; ``remaining`` is the SDK's timeout."""

    @abstractmethod
    def _accumulator(self) -> StreamAccumulator:
        """A fresh accumulator for one attempt's events."""

    @abstractmethod
    def _map_sdk_error(self, exc: Exception) -> Exception:
        """The exception to raise for one of the SDK's own (an instance of :attr:`sdk_error`):
        :exc:`TimeoutError` for a timeout, a
        :class:`~gateway.runtime.providers.retry.RetryableError` for what another attempt
        may fix, or a final :class:`~gateway.runtime.model.ProviderError`."""
