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

import json
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pydantic
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.config import ProviderSettings
from gateway.runtime.model import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)
from gateway.runtime.providers.retry import (
    RetryableFailure,
    RetryPolicy,
    StreamTracker,
    classify_status,
    malformed_response,
    run_with_retries,
)
from gateway.runtime.providers.stream_text import TextJoiner, ValidUTF8Decoder, clean_text
from gateway.runtime.providers.tool_arguments import parse_tool_arguments

OFFICIAL_HOST = "api.openai.com"

# finish_reason -> the neutral stop_reason of ModelResponse.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIProvider:
    """A configured ``type: openai`` provider.

    A missing ``api_key`` is sent as ``"none"``: local servers ignore it. The SDK's own
    retries are off; :func:`~gateway.runtime.providers.retry.run_with_retries` retries 429,
    5xx and connection errors instead.

    Args:
        name (:obj:`str`): The key under ``providers`` in talon.yaml.
        settings (:class:`~gateway.config.ProviderSettings`): ``api_key``, ``base_url``,
            ``timeout``, ``max_retries``.
        backoff_base (:obj:`float`, optional): First retry delay without ``retry-after``.
        retry_after_cap (:obj:`float`, optional): Longest wait honoured from ``retry-after``.
    """

    def __init__(
        self,
        name: str,
        settings: ProviderSettings,
        *,
        backoff_base: float = 0.5,
        retry_after_cap: float = 60.0,
    ) -> None:
        self.name = name
        self._timeout = settings.timeout
        self._policy = RetryPolicy(
            max_retries=settings.max_retries, backoff_base=backoff_base, retry_after_cap=retry_after_cap
        )
        self._client = _Client(
            api_key=settings.api_key or "none",
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=0,
        )
        # OpenAI's own API rejects max_tokens for newer models; compatible servers
        # (Ollama, llama.cpp, older vLLM) know only max_tokens.
        official = self._client.base_url.host == OFFICIAL_HOST
        self._max_tokens_key = "max_completion_tokens" if official else "max_tokens"

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        """Stream one Chat Completions call and return the whole response.

        Raises:
            :class:`~gateway.runtime.model.ProviderError`: See
            :func:`~gateway.runtime.providers.retry.run_with_retries`.
        """
        params = build_params(request, max_tokens_key=self._max_tokens_key)
        tracker = StreamTracker()

        async def attempt(remaining: float) -> ModelResponse:
            return await self._attempt(params, remaining, on_text, tracker)

        return await run_with_retries(
            attempt,
            self._policy,
            provider=self.name,
            timeout=min(self._timeout, request.timeout),
            tracker=tracker,
        )

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        await self._client.close()

    async def _attempt(
        self,
        params: dict[str, Any],
        remaining: float,
        on_text: TextDelta | None,
        tracker: StreamTracker,
    ) -> ModelResponse:
        acc = _Accumulator()
        try:
            stream = await self._client.post(
                "/chat/completions",
                body=params,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
                options={"timeout": remaining, "security": {"bearer_auth": True}},
            )
            try:
                async for chunk in stream:
                    text = acc.feed(chunk)
                    if text and on_text is not None:
                        tracker.started = True
                        await on_text(text)
                tail = acc.finish()
                if tail and on_text is not None:
                    tracker.started = True
                    await on_text(tail)
            finally:
                await stream.close()
        except (openai.APITimeoutError, httpx2.TimeoutException):
            raise TimeoutError from None  # the shared loop reports it with the configured timeout
        except openai.APIStatusError as exc:
            raise classify_status(
                self.name,
                exc.status_code,
                _body_message(exc.body) or exc.message,
                error_type=exc.type or exc.code,
                headers=exc.response.headers,
            ) from None
        except (openai.APIConnectionError, httpx2.TransportError) as exc:
            raise RetryableFailure(f"model provider {self.name!r}: connection failed: {exc}") from None
        except (openai.APIResponseValidationError, json.JSONDecodeError, pydantic.ValidationError) as exc:
            detail = f"invalid JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise malformed_response(self.name, detail) from None
        except openai.APIError as exc:
            # An error object inside a 200 stream.
            raise classify_status(self.name, 200, exc.message, error_type=exc.type or exc.code) from None
        return acc.result(self.name)


class _Client(openai.AsyncOpenAI):
    """The SDK's client, reading streams as valid UTF-8 (see
    :class:`~gateway.runtime.providers.stream_text.ValidUTF8Decoder`)."""

    def _make_sse_decoder(self) -> Any:
        return ValidUTF8Decoder(super()._make_sse_decoder())


def build_params(request: ModelRequest, *, max_tokens_key: str = "max_tokens") -> dict[str, Any]:
    """The Chat Completions request body for ``request``, streaming with usage."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(request.system, request.messages),
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
    system: str, messages: tuple[ChatMessage, ...] | list[ChatMessage]
) -> list[dict[str, Any]]:
    """Convert the system prompt and neutral transcript to Chat Completions ``messages``.

    The system prompt comes first; assistant tool calls become ``tool_calls`` with JSON
    ``arguments``; tool results become ``tool`` messages. The API has no error flag for a
    tool result, so a failed one says so in its text.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "tool":
            content = f"Error: {message.content}" if message.is_error else message.content
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
        else:
            out.append({"role": "user", "content": message.content})
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
            raise RetryableFailure(f"model provider {provider!r}: the stream ended before a finish_reason")
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
