"""The ``openai`` provider: Chat Completions through the official SDK, always streaming.

Works with any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp server,
LM Studio, OpenRouter...) given its ``base_url``.

The request goes out through the SDK client's own ``post`` with a body this module builds
as plain JSON (:func:`build_params`). ``chat.completions.create`` would first walk that
body against the SDK's TypedDict annotations to rename aliased fields, which plain JSON
has none of: that walk cost 3-6 ms of CPU per call for a 20-message transcript, more
than the rest of a turn (``bench/bench_telegram.py``; see ``bench/README.md``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.config import ProviderSettings
from gateway.runtime.model import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from gateway.runtime.providers.images import data_url, not_shown
from gateway.runtime.providers.retry import RetryableError, classify_status, malformed_response
from gateway.runtime.providers.stream_text import TextJoiner, ValidUTF8Decoder, clean_text
from gateway.runtime.providers.streaming import EventStream, StreamingProvider
from gateway.runtime.providers.tool_arguments import parse_tool_arguments

OFFICIAL_HOST = "api.openai.com"

# finish_reason -> the neutral stop_reason of ModelResponse.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class _Client(openai.AsyncOpenAI):
    """The SDK's client, reading streams as valid UTF-8 (see
    :class:`~gateway.runtime.providers.stream_text.ValidUTF8Decoder`)."""

    def _make_sse_decoder(self, *args: Any, **kwargs: Any) -> Any:
        # Passes through what the SDK hands its own decoder factory (newer releases pass the
        # request's options), so an SDK upgrade cannot break streaming here.
        return ValidUTF8Decoder(super()._make_sse_decoder(*args, **kwargs))


class OpenAIProvider(StreamingProvider[_Client]):
    """A configured ``type: openai`` provider (see
    :class:`~gateway.runtime.providers.streaming.StreamingProvider` for the arguments).

    A missing ``api_key`` is sent as ``"none"``: local servers ignore it. Retries 429, 5xx
    and connection errors.
    """

    kind = "openai"
    sdk_error = openai.APIError

    def _make_client(self, settings: ProviderSettings) -> _Client:
        return _Client(
            api_key=settings.api_key or "none",
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=0,
        )

    @functools.cached_property
    def _max_tokens_key(self) -> str:
        # OpenAI's own API rejects max_tokens for newer models; compatible servers
        # (Ollama, llama.cpp, older vLLM) know only max_tokens.
        official = self._client is not None and self._client.base_url.host == OFFICIAL_HOST
        return "max_completion_tokens" if official else "max_tokens"

    def _build_params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(
            request, max_tokens_key=self._max_tokens_key, images=self.settings.accepts_images(request.model)
        )

    async def _open_stream(self, client: _Client, params: dict[str, Any], remaining: float) -> EventStream:
        return await client.post(
            "/chat/completions",
            body=params,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
            options={"timeout": remaining, "security": {"bearer_auth": True}},
        )

    def _accumulator(self) -> _Accumulator:
        return _Accumulator()

    def _map_sdk_error(self, exc: openai.APIError) -> Exception:
        if isinstance(exc, openai.APITimeoutError):
            return TimeoutError()
        if isinstance(exc, openai.APIStatusError):
            return classify_status(
                self.name,
                exc.status_code,
                _body_message(exc.body) or exc.message,
                error_type=exc.type or exc.code,
                headers=exc.response.headers,
            )
        if isinstance(exc, openai.APIConnectionError):
            return self._connection_failed(exc)
        if isinstance(exc, openai.APIResponseValidationError):
            return malformed_response(self.name, str(exc))
        # An error object inside a 200 stream.
        return classify_status(self.name, 200, exc.message, error_type=exc.type or exc.code)


def build_params(
    request: ModelRequest, *, max_tokens_key: str = "max_tokens", images: bool = True
) -> dict[str, Any]:
    """The Chat Completions request body for ``request``, streaming with usage; ``images``:
    whether the model takes the images of tool results."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(request.system, request.messages, images=images),
        max_tokens_key: request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [to_openai_tool(t) for t in request.tools]
    return params


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema},
    }


def to_openai_messages(
    system: str, messages: tuple[ChatMessage, ...] | list[ChatMessage], *, images: bool = True
) -> list[dict[str, Any]]:
    """Convert the system prompt and neutral transcript to Chat Completions ``messages``.

    The system prompt comes first; assistant tool calls become ``tool_calls`` with JSON
    ``arguments``; tool results become ``tool`` messages. The API has no error flag for a
    tool result, so a failed one says so in its text. A ``tool`` message carries text only,
    so the images of tool results follow the run of tool messages as one ``user`` message
    of ``image_url`` parts (data URLs), each introduced by the call it came from; without
    ``images`` a note in the tool message's text says they were not shown. A user message's
    images (photos the user sent) are ``image_url`` parts after its text.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    shown: list[dict[str, Any]] = []  # image parts waiting for the end of the tool messages
    for message in messages:
        if message.role != "tool" and shown:
            out.append({"role": "user", "content": shown})
            shown = []
        if message.role == "tool":
            content = f"Error: {message.content}" if message.is_error else message.content
            if message.images and images:
                shown.append(
                    {"type": "text", "text": f"The image(s) returned by tool call {message.tool_call_id}:"}
                )
                shown.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in message.images)
            else:
                content = not_shown(content, message.images)
            out.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            elif not message.content:
                continue
            out.append(entry)
        elif message.images and images:
            parts: list[dict[str, Any]] = (
                [{"type": "text", "text": message.content}] if message.content else []
            )
            parts.extend({"type": "image_url", "image_url": {"url": data_url(i)}} for i in message.images)
            out.append({"role": "user", "content": parts})
        else:
            out.append({"role": "user", "content": not_shown(message.content, message.images)})
    if shown:
        out.append({"role": "user", "content": shown})
    return out


@dataclass(slots=True)
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: TextJoiner = field(default_factory=TextJoiner)


@dataclass(slots=True)
class _Accumulator:
    """Folds streamed chunks into one response."""

    chunks: int = 0
    text: TextJoiner = field(default_factory=TextJoiner)
    calls: dict[int, _ToolCallParts] = field(default_factory=dict)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0

    def feed(self, chunk: Any) -> str:
        """Take one chunk; return text to stream to the caller, if any."""
        self.chunks += 1
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.input_tokens = getattr(usage, "prompt_tokens", None) or self.input_tokens
            self.output_tokens = getattr(usage, "completion_tokens", None) or self.output_tokens
        text = ""
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
            delta = getattr(choice, "delta", None)
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                text += self.text.append(content)
            for position, part in enumerate(getattr(delta, "tool_calls", None) or ()):
                self._add_call_part(position, part)
        return text

    def _add_call_part(self, position: int, part: Any) -> None:
        index = getattr(part, "index", None)
        call = self.calls.setdefault(index if isinstance(index, int) else position, _ToolCallParts())
        call.id = getattr(part, "id", None) or call.id
        function = getattr(part, "function", None)
        call.name = getattr(function, "name", None) or call.name
        arguments = getattr(function, "arguments", None)
        if isinstance(arguments, str):
            call.arguments.append(arguments)

    def finish(self) -> str:
        """The stream ended: flush what the joiners hold; returns text still to stream."""
        for call in self.calls.values():
            call.arguments.finish()
        return self.text.finish()

    def result(self, provider: str) -> ModelResponse:
        if self.chunks == 0:
            raise malformed_response(provider, "the response held no stream chunks")
        if self.finish_reason is None:
            raise RetryableError(f"model provider {provider!r}: the stream ended before a finish_reason")
        calls = tuple(
            ToolCall(
                id=clean_text(call.id) or f"call_{index}",
                name=clean_text(call.name),
                arguments=parse_tool_arguments(call.arguments.text),
            )
            for index, call in sorted(self.calls.items())
        )
        stop = STOP_REASONS.get(self.finish_reason, self.finish_reason)
        if calls and self.finish_reason == "stop":
            # Some compatible servers report "stop" even when they called tools.
            stop = "tool_use"
        return ModelResponse(
            text=self.text.text,
            tool_calls=calls,
            stop_reason=stop,
            usage=Usage(self.input_tokens, self.output_tokens),
        )


def _body_message(body: object) -> str | None:
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else None
