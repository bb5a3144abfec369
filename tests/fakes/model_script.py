"""What the model API stand-ins answer: scripted steps and default responders.

A test scripts steps in order (``fake.script(Reply(...), Error(429), ...)``); each request
takes the next one. When the script is empty, the server asks its ``responder``.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

EVERY_UNIT: Literal["every-utf16-unit"] = "every-utf16-unit"
"""As ``Reply.utf16_cuts`` / ``Reply.argument_cuts``: cut between every two UTF-16 code units."""

Cuts = Sequence[int] | Literal["every-utf16-unit"]


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_pieces(text: str, cuts: Cuts) -> list[str]:
    """``text`` cut at UTF-16 code unit offsets; a cut inside a surrogate pair leaves each
    piece with a lone surrogate, which JSON sends as a ``\\udXXX`` escape."""
    units = text.encode("utf-16-le", "surrogatepass")
    size = len(units) // 2
    offsets = range(1, size) if cuts == EVERY_UNIT else sorted({c for c in cuts if 0 < c < size})
    bounds = [0, *offsets, size]
    return [units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass") for a, b in itertools.pairwise(bounds)]


def joined_text(pieces: Sequence[str | bytes]) -> str:
    """What a client that joins ``pieces`` correctly reads: surrogate halves paired again,
    each raw bytes piece decoded on its own (its invalid UTF-8 as U+FFFD)."""
    text = "".join(p.decode("utf-8", "replace") if isinstance(p, bytes) else p for p in pieces)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


_SURROGATE = re.compile("[\ud800-\udfff]")
_RAW_MARK = "@raw-bytes-{}@"


def json_bytes(data: Any, *, raw_utf8: bool = False) -> bytes:
    """``data`` as JSON on the wire.

    Non-ASCII goes out as ``\\u`` escapes, or with ``raw_utf8`` as UTF-8 (lone surrogates
    are escaped even then: UTF-8 cannot carry them). A ``bytes`` value is spliced into its
    JSON string as it is, so a scripted server can send invalid UTF-8; it must hold no
    ``"``, backslash or control byte.
    """
    raws: list[bytes] = []

    def swap(value: Any) -> Any:
        if isinstance(value, bytes):
            raws.append(value)
            return _RAW_MARK.format(len(raws) - 1)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps(swap(data), ensure_ascii=not raw_utf8)
    if raw_utf8:
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    out = text.encode("utf-8")
    for i, raw in enumerate(raws):
        out = out.replace(_RAW_MARK.format(i).encode(), raw, 1)
    return out


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
        text: The reply text; streamed word by word unless ``chunks`` or ``utf16_cuts``
            gives the deltas.
        tool_calls: Tool calls after the text.
        delay: Seconds before the response starts (a slow model).
        chunk_delay: Seconds between stream events.
        chunks: Explicit text deltas (their concatenation replaces ``text``). A ``bytes``
            delta goes into the event's JSON string as raw bytes (see :func:`json_bytes`):
            a server sending invalid UTF-8, e.g. one character's bytes cut between deltas.
        utf16_cuts: Cut ``text`` into deltas at these UTF-16 code unit offsets
            (:data:`EVERY_UNIT`: between every two), splitting surrogate pairs too.
        argument_cuts: The same for each tool call's arguments JSON (default: every 7
            characters).
        raw_utf8: Send non-ASCII as UTF-8 rather than ``\\u`` escapes, as many servers do.
        cut_characters: Write each stream event in pieces cut inside every multi-byte
            UTF-8 character it holds, pausing between them, so the client's reads end
            mid-character.
        input_tokens / output_tokens: Usage to report; estimated from sizes when omitted.
        stop_reason: Overrides the API's stop/finish reason.
    """

    text: str = ""
    tool_calls: Sequence[Call] = ()
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: Sequence[str | bytes] | None = None
    utf16_cuts: Cuts | None = None
    argument_cuts: Cuts | None = None
    raw_utf8: bool = False
    cut_characters: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None

    def deltas(self) -> list[str | bytes]:
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        if self.utf16_cuts is not None:
            return utf16_pieces(self.text, self.utf16_cuts) if self.text else []
        return re.findall(r"\s*\S+\s*", self.text) or ([self.text] if self.text else [])

    def argument_deltas(self, raw: str) -> list[str]:
        if self.argument_cuts is not None:
            return utf16_pieces(raw, self.argument_cuts)
        return [raw[start : start + 7] for start in range(0, len(raw), 7)]

    @property
    def full_text(self) -> str:
        return joined_text(self.deltas())


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


def attach_responder(channel: str) -> Responder:
    """A user message ``attach PATH ...`` makes the model call ``channel_send`` into ``channel``
    with those attachments and no text, then answer ``sent`` once the tool answered; anything
    else is echoed. For a daemon in another process, where no test can script steps."""

    def respond(body: dict[str, Any]) -> Reply:
        if _answers_a_tool(body):
            return Reply(text="sent")
        words = last_user_text(body).split()
        if words[:1] == ["attach"]:
            arguments = {"channelId": channel, "content": "", "attachments": words[1:]}
            return Reply(tool_calls=[Call("channel_send", arguments)])
        return echo_responder(body)

    return respond


def draw_responder(body: dict[str, Any]) -> Reply:
    """A user message ``draw PROMPT`` makes the model call ``image_generate`` with that prompt,
    then answer ``drawn`` once the tool answered; anything else is echoed."""
    if _answers_a_tool(body):
        return Reply(text="drawn")
    text = last_user_text(body)
    if text.startswith("draw "):
        return Reply(tool_calls=[Call("image_generate", {"prompt": text.removeprefix("draw ")})])
    return echo_responder(body)


def _answers_a_tool(body: dict[str, Any]) -> bool:
    """The request ends with a tool result (OpenAI's ``tool`` role, Anthropic's ``tool_result``)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if not isinstance(last, dict):
        return False
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    return last.get("role") == "tool" or any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )


def delayed(responder: Responder, seconds: float) -> Responder:
    """Wrap ``responder`` so each of its replies starts after ``seconds``."""

    def respond(body: dict[str, Any]) -> Step:
        return replace(responder(body), delay=seconds)

    return respond


def streamed_slowly(responder: Responder, chunk_delay: float) -> Responder:
    """Wrap ``responder`` so each reply streams word by word, ``chunk_delay`` seconds apart."""

    def respond(body: dict[str, Any]) -> Step:
        step = responder(body)
        return replace(step, chunk_delay=chunk_delay) if isinstance(step, Reply) else step

    return respond


def split_everywhere(responder: Responder) -> Responder:
    """Wrap ``responder`` so each reply streams cut at every UTF-16 code unit, as raw
    UTF-8, with network writes cut inside characters."""

    def respond(body: dict[str, Any]) -> Step:
        step = responder(body)
        if not isinstance(step, Reply) or step.chunks is not None:
            return step
        return replace(
            step, utf16_cuts=EVERY_UNIT, argument_cuts=EVERY_UNIT, raw_utf8=True, cut_characters=True
        )

    return respond


def estimate_tokens(text: str) -> int:
    """A rough token count (four characters a token), at least 1."""
    return max(1, len(text) // 4)
