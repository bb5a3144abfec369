"""The images endpoint's answers are bounded: an image over the cap, base64 that is not,
bytes that are not an image, a URL pointing at a private or metadata address (refused by the
egress guard before any connection), and an endpoint too slow for images.timeout."""

from __future__ import annotations

import base64

import pytest

from gateway.config import ProviderSettings
from gateway.image_settings import ImageSettings
from tests.fakes.images_api import FakeImagesAPI
from tools.base import ToolError
from tools.images.endpoint import _bytes, call_images

PROVIDER = ProviderSettings(type="openai", base_url="http://127.0.0.1:9/v1", api_key="k")


async def test_an_image_over_the_cap_is_refused_before_it_is_decoded() -> None:
    huge = base64.b64encode(b"\0" * 20_000).decode()
    with pytest.raises(ToolError, match="over 10,000 bytes"):
        await _bytes(huge, None, PROVIDER, 10_000)


async def test_base64_that_is_not_is_refused() -> None:
    with pytest.raises(ToolError, match="not base64"):
        await _bytes("%%% not base64 %%%", None, PROVIDER, 10_000)


@pytest.mark.parametrize(
    "url", ["http://10.1.2.3/a.png", "http://169.254.169.254/latest", "http://[::ffff:127.0.0.2]/x"]
)
async def test_a_url_on_another_host_goes_through_the_egress_guard(url: str) -> None:
    # Literal addresses: the guard decides from the address itself; nothing is connected to.
    with pytest.raises(ToolError):
        await _bytes(None, url, PROVIDER, 10_000)


async def test_an_answer_without_an_image_is_refused() -> None:
    with pytest.raises(ToolError, match="neither b64_json nor url"):
        await _bytes(None, None, PROVIDER, 10_000)


async def test_a_slow_endpoint_ends_at_the_timeout() -> None:
    async with FakeImagesAPI(delay=5) as fake:
        provider = ProviderSettings(type="openai", base_url=fake.base_url, api_key=fake.api_key)
        settings = ImageSettings(provider="p", timeout=0.3)
        with pytest.raises(ToolError, match=r"did not answer within 0\.3 seconds"):
            await call_images(provider, settings, {"prompt": "x", "model": "gpt-image-1"})


async def test_junk_bytes_come_back_as_they_are_for_the_caller_to_refuse() -> None:
    async with FakeImagesAPI(form="junk") as fake:
        provider = ProviderSettings(type="openai", base_url=fake.base_url, api_key=fake.api_key)
        picture = await call_images(
            provider, ImageSettings(provider="p"), {"prompt": "x", "model": "gpt-image-1"}
        )
    assert picture.data == b"hello"  # tools.images.common.deliver sniffs it and refuses
