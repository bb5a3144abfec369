"""An OpenAI-compatible provider's audio endpoints, through the official SDK:
``/audio/transcriptions`` (speech to text) and ``/audio/speech`` (text to speech).

Each call is bounded in time (retries and waits included) and in size, and retried on what
another attempt may fix (429, 5xx, a dropped connection) with the model providers' retry loop
(:func:`gateway.runtime.providers.retry.run_with_retries`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import openai

from gateway.backoff import Backoff
from gateway.config import ProviderSettings
from gateway.runtime.model import ProviderError
from gateway.runtime.providers.retry import RetryableError, RetryPolicy, classify_status, run_with_retries

__all__ = ["MAX_SPEECH_BYTES", "MAX_TRANSCRIPT_CHARS", "AudioClient", "ProviderError"]

T = TypeVar("T")

MAX_SPEECH_BYTES = 20 * 1024 * 1024
MAX_TRANSCRIPT_CHARS = 20_000
_BACKOFF = Backoff(base=0.25, max=4.0)


class AudioClient:
    """The audio endpoints of provider ``name`` (``type: openai``)."""

    def __init__(self, name: str, settings: ProviderSettings):
        self.name = name
        self._client = openai.AsyncOpenAI(
            api_key=settings.api_key or "none",
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.timeout,
        )

    async def transcribe(
        self,
        data: bytes,
        filename: str,
        mime: str,
        *,
        model: str,
        language: str | None,
        timeout: float,
        attempts: int,
    ) -> str:
        """The text spoken in ``data``, at most :data:`MAX_TRANSCRIPT_CHARS` characters.

        Raises:
            ProviderError: After ``attempts`` tries, past ``timeout``, or refused (4xx).
        """

        async def attempt(remaining: float) -> str:
            extra = {"language": language} if language else {}
            result = await self._client.audio.transcriptions.create(
                model=model, file=(filename, data, mime), response_format="json", timeout=remaining, **extra
            )
            return str(getattr(result, "text", "") or "")

        text = await self._run(attempt, timeout, attempts)
        return text.strip()[:MAX_TRANSCRIPT_CHARS]

    async def speak(self, text: str, *, model: str, voice: str, timeout: float, attempts: int = 2) -> bytes:
        """``text`` spoken, as the endpoint returns it (OGG/Opus asked for; some servers send
        WAV or MP3 regardless), at most :data:`MAX_SPEECH_BYTES`.

        Raises:
            ProviderError: As :meth:`transcribe`, or when the audio is over the size cap.
        """

        async def attempt(remaining: float) -> bytes:
            speech = self._client.audio.speech.with_streaming_response
            async with speech.create(
                model=model, voice=voice, input=text, response_format="opus", timeout=remaining
            ) as response:
                chunks, size = [], 0
                async for block in response.iter_bytes():
                    size += len(block)
                    if size > MAX_SPEECH_BYTES:
                        raise ProviderError(
                            f"audio provider {self.name!r}: speech over {MAX_SPEECH_BYTES:,} bytes",
                            transient=False,
                        )
                    chunks.append(block)
            return b"".join(chunks)

        return await self._run(attempt, timeout, attempts)

    async def _run(self, attempt: Callable[[float], Awaitable[T]], timeout: float, attempts: int) -> T:
        async def mapped(remaining: float) -> T:
            try:
                return await attempt(remaining)
            except openai.APITimeoutError:
                raise TimeoutError from None
            except openai.APIStatusError as exc:
                raise classify_status(
                    f"{self.name}", exc.status_code, _message(exc), headers=exc.response.headers
                ) from None
            except openai.APIConnectionError as exc:
                raise RetryableError(f"audio provider {self.name!r}: connection failed: {exc}") from None
            except openai.APIError as exc:
                raise ProviderError(f"audio provider {self.name!r}: {exc.message}", transient=True) from None

        policy = RetryPolicy(max_retries=attempts - 1, backoff=_BACKOFF, retry_after_cap=10.0)
        return await run_with_retries(mapped, policy, provider=self.name, timeout=timeout)

    async def close(self) -> None:
        await self._client.close()


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:300]
    return exc.message[:300]
