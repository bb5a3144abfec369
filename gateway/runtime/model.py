"""Provider-neutral types for talking to a model.

The agent loop speaks only these types; each provider converts them to its SDK's shapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gateway.errors import PlatformError


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: MCP-style name, description, JSON schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image a tool hands to the model (``view_image``).

    Attributes:
        media_type (:obj:`str`): ``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``.
        data (:obj:`str`): The file's bytes, base64-encoded.
    """

    media_type: str
    data: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool result with more than JSON: ``value`` reaches the model as text, ``images`` as
    image content where the provider and model accept images (else the text alone)."""

    value: Any
    images: tuple[ImageBlock, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One transcript entry.

    ``user``/``assistant`` carry text; an assistant message may also carry tool calls;
    ``tool`` carries the result of the call named by ``tool_call_id``, and the images it
    returned, if any.
    """

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one or more model calls; the cache counts are the parts of ``input_tokens``
    read from and written to the provider's prompt cache (priced apart)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    timeout: float = 120.0


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None  # the model that answered, when not the request's (a fallback)


TextDelta = Callable[[str], Awaitable[None]]
"""Receives streamed text as it arrives (may be ignored)."""


class ProviderError(PlatformError):
    """A model call failed after the provider's own retries.

    ``transient`` tells the queue whether retrying the turn later may help;
    ``retry_after`` (seconds) is the provider's own hint when it gave one; ``fallback``
    whether a persona's next model may be tried instead (the model was unavailable: 408, 429,
    5xx, overloaded, unreachable or timed out, before any text was streamed), never for a
    request or key the API refused.
    """

    def __init__(
        self, message: str, *, transient: bool, retry_after: float | None = None, fallback: bool = False
    ):
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after
        self.fallback = fallback


class ModelProvider(Protocol):
    """One configured provider (``providers.<name>`` in talon.yaml)."""

    name: str

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        """Run one model call (streaming), returning the whole response.

        Retries 429/5xx/overloaded itself, honouring ``retry-after``; raises
        :class:`ProviderError` when it gives up or the request is invalid.
        """

    async def aclose(self) -> None: ...
