"""The ``anthropic`` provider: the Messages API through the official SDK, always streaming."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic

from gateway.config import ProviderSettings
from gateway.runtime.model import (
    ChatMessage,
    ImageBlock,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from gateway.runtime.providers.images import not_shown
from gateway.runtime.providers.retry import RetryableError, classify_status, malformed_response
from gateway.runtime.providers.stream_text import TextJoiner, ValidUTF8Decoder, clean_text, clean_value
from gateway.runtime.providers.streaming import EventStream, StreamingProvider
from gateway.runtime.providers.tool_arguments import parse_tool_arguments


class _Client(anthropic.AsyncAnthropic):
    """The SDK's client, reading streams as valid UTF-8 (see
    :class:`~gateway.runtime.providers.stream_text.ValidUTF8Decoder`)."""

    def _make_sse_decoder(self, *args: Any, **kwargs: Any) -> Any:
        # Passes through what the SDK hands its own decoder factory (newer releases pass the
        # request's options), so an SDK upgrade cannot break streaming here.
        return ValidUTF8Decoder(super()._make_sse_decoder(*args, **kwargs))


class AnthropicProvider(StreamingProvider[_Client]):
    """A configured ``type: anthropic`` provider (see
    :class:`~gateway.runtime.providers.streaming.StreamingProvider` for the arguments).

    Retries 429, 5xx, ``overloaded_error`` and connection errors.
    """

    kind = "anthropic"
    sdk_error = anthropic.APIError

    def _make_client(self, settings: ProviderSettings) -> _Client | None:
        # Without a key the client is never built, so the SDK cannot fall back to
        # credentials from the environment or a profile on disk.
        if not settings.api_key:
            return None
        return _Client(
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=0,
        )

    def _build_params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(request, images=self.settings.accepts_images(request.model))

    async def _open_stream(self, client: _Client, params: dict[str, Any], remaining: float) -> EventStream:
        return await client.messages.create(**params, stream=True, timeout=remaining)

    def _accumulator(self) -> _Accumulator:
        return _Accumulator()

    def _map_sdk_error(self, exc: anthropic.APIError) -> Exception:
        if isinstance(exc, anthropic.APITimeoutError):
            return TimeoutError()
        if isinstance(exc, anthropic.APIStatusError):
            return classify_status(
                self.name,
                exc.status_code,
                exc.api_message or _body_message(exc.body) or exc.message,
                error_type=exc.type or _body_type(exc.body),
                headers=exc.response.headers,
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return self._connection_failed(exc)
        return malformed_response(self.name, str(exc))


def build_params(request: ModelRequest, *, images: bool = True) -> dict[str, Any]:
    """The Messages API request body for ``request`` (without ``stream``); ``images``: whether
    the model takes the images of tool results."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": to_anthropic_messages(request.messages, images=images),
    }
    if request.system:
        params["system"] = request.system
    if request.tools:
        params["tools"] = [to_anthropic_tool(t) for t in request.tools]
    return params


def to_anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def to_anthropic_messages(
    messages: tuple[ChatMessage, ...] | list[ChatMessage], *, images: bool = True
) -> list[dict[str, Any]]:
    """Convert the neutral transcript to Messages API ``messages``.

    Tool results become ``tool_result`` blocks in a user message, their images ``image``
    blocks inside them (or, without ``images``, a note in the text); a user message's images
    (photos the user sent) follow its text the same way; consecutive messages of
    the same API role (several tool results, or results followed by user text) are merged
    into one message, which keeps the roles alternating as the API expects. Blank text is
    dropped because the API rejects empty text blocks.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message, images)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: ChatMessage, images: bool) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        if message.images and images:
            block["content"] = _result_content(message)
        elif message.content or message.images:
            block["content"] = not_shown(message.content, message.images)
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    text = message.content if images else not_shown(message.content, message.images)
    if text.strip():
        blocks.append({"type": "text", "text": text})
    if message.role == "user" and images:
        blocks.extend(_image_blocks(message.images))
    if message.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        )
    return message.role, blocks


def _result_content(message: ChatMessage) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    content.extend(_image_blocks(message.images))
    return content


def _image_blocks(images: tuple[ImageBlock, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": i.data}}
        for i in images
    ]


@dataclass(slots=True)
class _ToolBlock:
    id: str
    name: str
    start_input: dict[str, Any]
    json_parts: TextJoiner = field(default_factory=TextJoiner)


@dataclass(slots=True)
class _Accumulator:
    """Folds streaming events into one response."""

    events: int = 0
    finished: bool = False
    text: TextJoiner = field(default_factory=TextJoiner)
    tools: dict[int, _ToolBlock] = field(default_factory=dict)
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def feed(self, event: Any) -> str:
        """Take one event; return text to stream to the caller, if any."""
        self.events += 1
        kind = getattr(event, "type", None)
        if kind == "message_start":
            usage = getattr(getattr(event, "message", None), "usage", None)
            self._usage(usage)
        elif kind == "content_block_start":
            block = getattr(event, "content_block", None)
            block_type = getattr(block, "type", None)
            if block_type == "text":
                return self._add_text(getattr(block, "text", "") or "")
            if block_type == "tool_use":
                start = getattr(block, "input", None)
                self.tools[getattr(event, "index", len(self.tools))] = _ToolBlock(
                    id=getattr(block, "id", "") or f"toolu_{len(self.tools)}",
                    name=getattr(block, "name", "") or "",
                    start_input=clean_value(start) if isinstance(start, dict) else {},
                )
        elif kind == "content_block_delta":
            delta = getattr(event, "delta", None)
            delta_type = getattr(delta, "type", None)
            if delta_type == "text_delta":
                return self._add_text(getattr(delta, "text", "") or "")
            if delta_type == "input_json_delta":
                tool = self.tools.get(getattr(event, "index", -1))
                if tool is not None:
                    tool.json_parts.append(getattr(delta, "partial_json", "") or "")
        elif kind == "message_delta":
            self.stop_reason = getattr(getattr(event, "delta", None), "stop_reason", None) or self.stop_reason
            self._usage(getattr(event, "usage", None))
        elif kind == "message_stop":
            self.finished = True
        return ""

    def _add_text(self, text: str) -> str:
        return self.text.append(text) if text else ""

    def finish(self) -> str:
        """The stream ended: flush what the joiners hold; returns text still to stream."""
        for tool in self.tools.values():
            tool.json_parts.finish()
        return self.text.finish()

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        # Cached prompt tokens are reported apart from input_tokens; all of them were sent.
        inputs = [
            getattr(usage, k, None)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        if any(isinstance(n, int) for n in inputs):
            self.input_tokens = sum(n for n in inputs if isinstance(n, int))
        output = getattr(usage, "output_tokens", None)
        if isinstance(output, int):
            self.output_tokens = output
        read, written = (
            getattr(usage, k, None) for k in ("cache_read_input_tokens", "cache_creation_input_tokens")
        )
        if isinstance(read, int):
            self.cache_read_tokens = read
        if isinstance(written, int):
            self.cache_write_tokens = written

    def result(self, provider: str) -> ModelResponse:
        if self.events == 0:
            raise malformed_response(provider, "the response held no stream events")
        if not self.finished:
            raise RetryableError(f"model provider {provider!r}: the stream ended before message_stop")
        calls = tuple(
            ToolCall(
                id=clean_text(tool.id),
                name=clean_text(tool.name),
                arguments=parse_tool_arguments(tool.json_parts.text) if tool.json_parts else tool.start_input,
            )
            for _, tool in sorted(self.tools.items())
        )
        stop = self.stop_reason or ("tool_use" if calls else "end_turn")
        return ModelResponse(
            text=self.text.text,
            tool_calls=calls,
            stop_reason=stop,
            usage=Usage(
                self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens
            ),
        )


def _body_message(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def _body_type(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None
