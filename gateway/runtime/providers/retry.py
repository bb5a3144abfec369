"""The retry loop shared by every model provider.

A provider runs one HTTP attempt at a time and turns the SDK's exceptions into either a
:class:`RetryableError` (try again after a delay) or a final
:class:`~gateway.runtime.model.ProviderError`. :func:`run_with_retries` owns the loop: how
many attempts, how long to wait between them, and the deadline for the whole call.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from gateway.backoff import Backoff
from gateway.config import SECRET_HINTS
from gateway.errors import TransientError
from gateway.runtime.model import ProviderError

T = TypeVar("T")

log = logging.getLogger(__name__)

# HTTP statuses the model APIs use for "not now, try again".
RETRY_STATUSES = frozenset({408, 409, 429, *range(500, 600)})
# Error types that mean the same when they arrive inside a 200 streaming response.
RETRY_ERROR_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "server_error"})
# Statuses after which a persona's next model is tried (Anthropic's 529 is "overloaded").
FALLBACK_STATUSES = frozenset({408, 429, *range(500, 600)})
# Delays between the attempts of one model call when the API names none.
MODEL_CALL_BACKOFF = Backoff(base=0.5, max=30.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a provider retries one model call.

    Args:
        max_retries (:obj:`int`): Retries after the first attempt (``providers.<name>.max_retries``).
        backoff (:class:`~gateway.backoff.Backoff`, optional): Delays when the API gave no
            ``retry-after``. Defaults to :data:`MODEL_CALL_BACKOFF` (0.5 s doubling to 30 s).
        retry_after_cap (:obj:`float`, optional): Upper bound applied to the API's ``retry-after``
            hint. Defaults to ``60``.
    """

    max_retries: int = 3
    backoff: Backoff = MODEL_CALL_BACKOFF
    retry_after_cap: float = 60.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        return self.backoff.delay(retry + 1)


class RetryableError(TransientError):
    """One attempt failed in a way another attempt may fix.

    Args:
        message (:obj:`str`): What went wrong, for logs and the final error.
        retry_after (:obj:`float`, optional): The API's own hint, in seconds.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        error_type: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.status = status  # None: no response (connection failed, the stream broke off)
        self.error_type = error_type

    @property
    def unavailable(self) -> bool:
        """The model was unavailable (another model may answer): 408, 429, 5xx, overloaded, no
        response. 409 and other statuses are not: they are about this request."""
        if self.status is None or self.status == 200:
            return self.status is None or self.error_type in RETRY_ERROR_TYPES
        return self.status in FALLBACK_STATUSES


class StreamTracker:
    """Records whether any text already reached the caller's ``on_text``.

    Once text has been shown, a retry would show it a second time, so the loop gives up
    instead and lets the caller retry the whole turn.
    """

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False


def missing_key_error(name: str, kind: str) -> ProviderError:
    """The refusal of provider ``name`` (type ``kind``) whose settings hold no API key."""
    var = SECRET_HINTS[(kind, "api_key")]
    return ProviderError(
        f"providers.{name}.api_key is empty; set {var} in .env or the environment", transient=False
    )


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Read ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) from response headers.

    Returns:
        :obj:`float` | :obj:`None`: Seconds to wait, or :obj:`None` when absent or unreadable.
    """
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def classify_status(
    provider: str,
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> RetryableError | ProviderError:
    """Turn an API error response into a retryable failure or a final error.

    Args:
        provider (:obj:`str`): The provider's configured name, for the message.
        status (:obj:`int`): HTTP status (``200`` for an error event inside a stream).
        message (:obj:`str`): The API's own error message.
        error_type (:obj:`str`, optional): The API's error type, e.g. ``overloaded_error``.
        headers (Mapping[:obj:`str`, :obj:`str`], optional): Response headers, for ``retry-after``.
    """
    kind = f" {error_type}" if error_type else ""
    where = "error inside the response stream" if status == 200 else f"HTTP {status}"
    text = f"model provider {provider!r}: {where}{kind}: {message}"
    if status in RETRY_STATUSES or error_type in RETRY_ERROR_TYPES:
        return RetryableError(
            text, retry_after=parse_retry_after(headers), status=status, error_type=error_type
        )
    return ProviderError(text, transient=False)


def malformed_response(provider: str, detail: str) -> ProviderError:
    """The error for a response that could not be read (invalid JSON, broken stream).

    Transient: the queue may retry the turn later, but this call does not retry it, since
    a server that garbles one answer usually garbles the next one too.
    """
    return ProviderError(f"model provider {provider!r}: malformed response: {detail}", transient=True)


async def run_with_retries(
    attempt: Callable[[float], Awaitable[T]],
    policy: RetryPolicy,
    *,
    provider: str,
    timeout: float,
    tracker: StreamTracker | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, retrying :class:`RetryableError` per ``policy``.

    Args:
        attempt: Runs one try; receives the seconds left before the deadline (for the SDK's own
            timeout) and returns the result or raises :class:`RetryableError` /
            :class:`~gateway.runtime.model.ProviderError`.
        policy (:class:`RetryPolicy`): Retry count and delays.
        provider (:obj:`str`): The provider's configured name, for messages.
        timeout (:obj:`float`): Seconds for the whole call, retries and waits included.
        tracker (:class:`StreamTracker`, optional): When text has already been streamed, a
            failure is final instead of retried.

    Raises:
        :class:`~gateway.runtime.model.ProviderError`: ``transient=True`` on timeout or when
        retries are exhausted (with the last ``retry_after`` hint); ``transient=False`` for
        errors retrying cannot fix.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    retry = 0
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                return await attempt(max(deadline - loop.time(), 0.001))
        except TimeoutError:
            raise ProviderError(
                f"model provider {provider!r}: no complete response within {timeout:g} s",
                transient=True,
                fallback=not (tracker is not None and tracker.started),
            ) from None
        except RetryableError as failure:
            if tracker is not None and tracker.started:
                raise ProviderError(
                    f"{failure.message} (after part of the reply was streamed)",
                    transient=True,
                    retry_after=failure.retry_after,
                ) from None
            if retry >= policy.max_retries:
                raise ProviderError(
                    f"{failure.message} (gave up after {retry + 1} attempts)",
                    transient=True,
                    retry_after=failure.retry_after,
                    fallback=failure.unavailable,
                ) from None
            wait = policy.delay(retry, failure.retry_after)
            if loop.time() + wait >= deadline:
                raise ProviderError(
                    f"{failure.message} (the next retry in {wait:.1f} s would pass the {timeout:g} s timeout)",
                    transient=True,
                    retry_after=failure.retry_after,
                    fallback=failure.unavailable,
                ) from None
            log.warning("%s; retry %d/%d in %.2f s", failure.message, retry + 1, policy.max_retries, wait)
            await asyncio.sleep(wait)
            retry += 1
