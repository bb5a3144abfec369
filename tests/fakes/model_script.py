"""What the model API stand-ins answer: scripted steps and default responders.

A test scripts steps in order (``fake.script(Reply(...), Error(429), ...)``); each request
takes the next one. When the script is empty, the server asks its ``responder``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call in a scripted reply.

    ``arguments`` as a dict is sent as JSON; as a string it is sent verbatim (for invalid
    JSON). ``id`` is generated when omitted.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful model answer.

    Args:
        text: The reply text; streamed word by word unless ``chunks`` gives the deltas.
        tool_calls: Tool calls after the text.
        delay: Seconds before the response starts (a slow model).
        chunk_delay: Seconds between stream events.
        chunks: Explicit text deltas (their concatenation replaces ``text``).
        input_tokens / output_tokens: Usage to report; estimated from sizes when omitted.
        stop_reason: Overrides the API's stop/finish reason.
    """

    text: str = ""
    tool_calls: Sequence[Call] = ()
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: Sequence[str] | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None

    def deltas(self) -> list[str]:
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        return re.findall(r"\s*\S+\s*", self.text) or ([self.text] if self.text else [])

    @property
    def full_text(self) -> str:
        return "".join(self.deltas())


@dataclass(frozen=True, slots=True)
class Error:
    """An error response in the API's own shape.

    Args:
        status: HTTP status (``529`` is Anthropic's ``overloaded_error``).
        message: The error message; a default names the status.
        type: The API's error type; a default fits the status.
        retry_after: Sent as the ``retry-after`` header (seconds, fractions allowed).
        in_stream: Answer 200, start the stream, then send the error inside it.
        delay: Seconds before responding.
    """

    status: int
    message: str | None = None
    type: str | None = None
    retry_after: float | None = None
    in_stream: bool = False
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Malformed:
    """A 200 response that cannot be read: invalid JSON, or a stream event with invalid JSON.

    ``body`` replaces the default broken body verbatim.
    """

    body: str | None = None
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Drop the connection: before any response, or after ``after_events`` stream events."""

    after_events: int | None = None
    delay: float = 0.0


Step = Reply | Error | Malformed | Disconnect
Responder = Callable[[dict[str, Any]], Step]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message in an Anthropic or OpenAI request body."""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                return "\n".join(texts)
    return ""


def echo_responder(body: dict[str, Any]) -> Reply:
    """Answer every request with ``echo: <last user text>``."""
    return Reply(text=f"echo: {last_user_text(body)}")


def delayed(responder: Responder, seconds: float) -> Responder:
    """Wrap ``responder`` so each of its replies starts after ``seconds``."""

    def respond(body: dict[str, Any]) -> Step:
        return replace(responder(body), delay=seconds)

    return respond


def estimate_tokens(text: str) -> int:
    """A rough token count (four characters a token), at least 1."""
    return max(1, len(text) // 4)
