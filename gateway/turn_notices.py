"""What a chat is told when its turn fails for good, by what failed."""

from __future__ import annotations

from gateway.queue import ReplyNotSavedError
from gateway.runtime.model import ProviderError

APOLOGY = (
    "Sorry — I couldn't answer that: the model provider failed. The operator can find the details in the log."
)
NOT_SAVED = (
    "Sorry — I wrote a reply but could not save it: {reason}. The operator can find the details in the log."
)
TIMED_OUT = (
    "Sorry — I couldn't answer that in time: the turn ran past its time limit. "
    "The operator can find the details in the log."
)
INTERNAL = (
    "Sorry — I couldn't answer that: something went wrong inside the gateway. "
    "The operator can find the details in the log."
)
STOPPED = "Stopped."


def failure_notice(failure: BaseException | None) -> str:
    """The chat's notice for a turn that ``failure`` ended for good."""
    if isinstance(failure, ProviderError):
        return APOLOGY
    if isinstance(failure, ReplyNotSavedError):
        return NOT_SAVED.format(reason=failure.reason)
    if isinstance(failure, TimeoutError):
        return TIMED_OUT
    return INTERNAL
