"""A turn that failed for good tells the chat what failed, not always "the model provider"."""

from __future__ import annotations

import sqlite3

from gateway.queue import ReplyNotSavedError
from gateway.runtime.model import ProviderError
from gateway.turn_notices import failure_notice


def test_a_provider_failure_names_the_model_provider() -> None:
    notice = failure_notice(ProviderError("HTTP 503", transient=True))

    assert "the model provider failed" in notice


def test_a_reply_that_was_not_saved_says_it_was_written() -> None:
    failure = ReplyNotSavedError("reply not saved: IntegrityError", reason="the database refused the write")

    notice = failure_notice(failure)

    assert notice.startswith("Sorry — I wrote a reply but could not save it: the database refused the write.")
    assert "model provider" not in notice


def test_a_timeout_and_an_internal_error_do_not_blame_the_model_provider() -> None:
    timed_out, internal = failure_notice(TimeoutError()), failure_notice(sqlite3.OperationalError("locked"))

    assert "time limit" in timed_out and "inside the gateway" in internal
    assert "model provider" not in timed_out + internal
