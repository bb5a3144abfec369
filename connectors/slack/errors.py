"""Classify a failed Slack Web API call for the outbox.

The Web API client runs without retry handlers (see :mod:`connectors.slack.connector`), so
every failure surfaces here once and the outbox decides when to try again.
"""

from __future__ import annotations

import asyncio

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from connectors.base import ErrorClass, SendResult

# Slack says "it's possible some aspect of the operation succeeded" for these.
_MAYBE_DONE = frozenset({"internal_error", "fatal_error"})
# Slack refused before doing anything and asks to come back later.
_LATER = frozenset({"ratelimited", "service_unavailable", "team_added_to_org"})
_DEFAULT_RETRY_AFTER = 1.0
# What a Web API call raises for Slack's answers and for the network; anything else is a
# bug in the connector, which the outbox logs and retries rather than guess an outcome.
SEND_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError, OSError)


def retry_after_of(err: SlackApiError) -> float | None:
    """The ``Retry-After`` header of a refused call, in seconds, when present and sane."""
    headers = getattr(err.response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def api_error_code(err: SlackApiError) -> str:
    """Slack's ``error`` string (``channel_not_found``), or ``http_<status>`` without one."""
    data = getattr(err.response, "data", None)
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"]
    return f"http_{getattr(err.response, 'status_code', 0)}"


def classify_send_error(exc: BaseException) -> SendResult:
    """Map an exception raised by an ``AsyncWebClient`` call to a failed :class:`SendResult`.

    Rate limits and refusals made before anything happened are ``TRANSIENT`` (with Slack's
    ``Retry-After``); a request that may have landed (a timeout after it was sent, a dropped
    connection, a 5xx, ``internal_error``) is ``AMBIGUOUS``; everything else Slack rejected
    (``channel_not_found``, ``not_in_channel``, ``invalid_auth``, ``msg_too_long``...) is
    ``PERMANENT``.
    """
    if isinstance(exc, SlackApiError):
        code = api_error_code(exc)
        status = getattr(exc.response, "status_code", 200)
        if status == 429 or code in _LATER or status == 503:
            return SendResult.failed(
                ErrorClass.TRANSIENT,
                f"slack: {code}",
                retry_after=retry_after_of(exc) or _DEFAULT_RETRY_AFTER,
            )
        if code in _MAYBE_DONE or status >= 500:
            return SendResult.failed(
                ErrorClass.AMBIGUOUS, f"slack: {code} (the message may have been posted)"
            )
        return SendResult.failed(ErrorClass.PERMANENT, f"slack: {code}")
    # Order matters: a connect timeout is also a TimeoutError, but nothing was sent yet.
    if isinstance(exc, aiohttp.ConnectionTimeoutError | aiohttp.ClientConnectorError):
        return SendResult.failed(ErrorClass.TRANSIENT, f"cannot connect to Slack: {type(exc).__name__}")
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return SendResult.failed(
            ErrorClass.AMBIGUOUS, "timed out waiting for Slack (the message may have been posted)"
        )
    if isinstance(exc, aiohttp.ClientError):
        return SendResult.failed(
            ErrorClass.AMBIGUOUS, f"connection to Slack failed mid-request: {type(exc).__name__}"
        )
    if isinstance(exc, SlackClientError):
        return SendResult.failed(ErrorClass.PERMANENT, f"invalid request: {exc}")
    return SendResult.failed(ErrorClass.AMBIGUOUS, f"unexpected error: {type(exc).__name__}: {exc}")


def may_pass(err: SlackApiError) -> bool:
    """True when Slack failed for now (a 5xx, a rate limit, ``service_unavailable``), so a
    later start may succeed; False for a refusal that stays until the configuration changes."""
    status = getattr(err.response, "status_code", 0) or 0
    return status >= 500 or status == 429 or api_error_code(err) in _MAYBE_DONE | _LATER
