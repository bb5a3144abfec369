"""One images call to the OpenAI-compatible endpoint (``/images/generations``, ``/images/edits``)
with the official ``openai`` client, and the picture it answers with, within a size bound.

An answer is ``b64_json`` or a ``url``. A URL on the endpoint's own host is fetched directly
(the operator configured that host, as for model calls); one elsewhere goes through the egress
guard with no private address allowed, so a compromised endpoint cannot point the daemon at
the local network.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from gateway.config import ProviderSettings
from gateway.image_settings import ImageSettings
from tools.base import ToolError
from tools.egress import fetch
from tools.ssrf import EgressPolicy

if TYPE_CHECKING:
    import openai

__all__ = ["Picture", "call_images"]


@dataclass(frozen=True, slots=True)
class Picture:
    data: bytes
    revised_prompt: str | None


async def call_images(
    provider: ProviderSettings,
    settings: ImageSettings,
    params: dict[str, Any],
    references: Sequence[tuple[str, bytes]] = (),
) -> Picture:
    """Generate (no ``references``) or edit (``(name, bytes)`` each); raises :class:`ToolError`
    with what to do when the endpoint fails or answers with no usable image."""
    import openai  # here, not at module level: the SDK takes ~1 s to import and most daemons never draw

    client = openai.AsyncOpenAI(
        api_key=provider.api_key or "none",
        base_url=provider.base_url,
        timeout=settings.timeout,
        max_retries=2,
    )
    try:
        if references:
            response = await client.images.edit(image=list(references), **params)
        else:
            response = await client.images.generate(**params)
        items = response.data or []
        if not items:
            raise ToolError("the images endpoint answered without an image; try again or change the prompt")
        item = items[0]
        data = await _bytes(item.b64_json, item.url, provider, settings.max_image_bytes)
        return Picture(data, getattr(item, "revised_prompt", None))
    except openai.APIStatusError as exc:
        raise ToolError(_status_message(exc)) from None
    except openai.APITimeoutError:
        raise ToolError(
            f"the images endpoint did not answer within {settings.timeout:g} seconds (images.timeout in "
            "talon.yaml); try again, or ask for quality low"
        ) from None
    except openai.APIConnectionError as exc:
        raise ToolError(f"the images endpoint could not be reached ({exc}); try again later") from None
    finally:
        await client.close()


def _status_message(exc: openai.APIStatusError) -> str:
    detail = exc.message if isinstance(exc.message, str) else str(exc)
    if exc.status_code in (400, 422):
        return f"the images endpoint refused the request ({exc.status_code}: {detail[:500]}); change the arguments"
    if exc.status_code in (401, 403):
        return f"the images endpoint refused Talon's key ({exc.status_code}); the operator must fix providers in talon.yaml"
    return f"the images endpoint failed ({exc.status_code}: {detail[:300]}) after retries; try again later"


async def _bytes(b64: str | None, url: str | None, provider: ProviderSettings, cap: int) -> bytes:
    if b64:
        if len(b64) > (cap + 2) // 3 * 4 + 4:
            raise ToolError(f"the images endpoint sent an image over {cap:,} bytes (images.max_image_bytes)")
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("the images endpoint sent a b64_json that is not base64; try again") from None
    if url:
        return await _download(url, provider, cap)
    raise ToolError("the images endpoint answered with neither b64_json nor url; try again")


async def _download(url: str, provider: ProviderSettings, cap: int) -> bytes:
    own = urlsplit(provider.base_url or "https://api.openai.com/v1")
    target = urlsplit(url)
    if (target.scheme, target.hostname, target.port) == (own.scheme, own.hostname, own.port):
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
            if resp.status != 200:
                raise ToolError(f"the image's URL answered {resp.status}; try again")
            data = await resp.content.read(cap + 1)
    else:
        result = await fetch("GET", URL(url), EgressPolicy.build([], []), cap + 1)
        if result["status"] != 200 or result.get("bodyEncoding") != "base64":
            raise ToolError(f"the image's URL answered {result['status']} without an image; try again")
        data = base64.b64decode(result["body"])
    if len(data) > cap:
        raise ToolError(f"the images endpoint sent an image over {cap:,} bytes (images.max_image_bytes)")
    return data
