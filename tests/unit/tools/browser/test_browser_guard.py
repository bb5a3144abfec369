"""The browser's egress guard decides without a browser: what routing continues and what it
refuses, and with which reason. Names that stand for other addresses are answered by a stub
resolver; nothing here opens a connection."""

from __future__ import annotations

import pytest

from tests.unit.tools.browser.pages import StubResolver
from tools.browser.guard import MAX_BLOCKED_KEPT, RequestGuard
from tools.ssrf import EgressPolicy

ANSWERS = {"metadata.test": "169.254.169.254", "intranet.test": "10.1.2.3", "example.test": "93.184.215.14"}


def guard(domains: list[str] | None = None, private: list[str] | None = None) -> RequestGuard:
    return RequestGuard(EgressPolicy.build(domains or [], private or []), StubResolver(ANSWERS))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (
            "http://metadata.test/latest/",
            "metadata.test resolves to 169.254.169.254, a cloud metadata address",
        ),
        ("https://intranet.test/x.png", "intranet.test resolves to 10.1.2.3, a private address"),
        ("http://127.0.0.1:8080/", "127.0.0.1 is a loopback address"),
        ("ws://[::1]:9000/socket", "::1 is a loopback address"),
        ("http://[::ffff:169.254.169.254]/", "a cloud metadata address"),
        ("file:///etc/passwd", "the 'file' scheme is not allowed"),
        ("ftp://example.test/", "the 'ftp' scheme is not allowed"),
    ],
)
async def test_a_request_to_a_blocked_address_or_scheme_is_refused_with_the_reason(
    url: str, reason: str
) -> None:
    decision = await guard().decide(url)
    assert decision is not None and reason in decision


async def test_a_public_host_and_page_local_urls_may_go() -> None:
    g = guard()
    assert await g.decide("https://example.test/page") is None
    assert await g.decide("wss://example.test/live") is None
    assert await g.decide("data:image/png;base64,AAAA") is None
    assert await g.decide("blob:https://example.test/1234") is None


async def test_the_domain_allowlist_is_checked_before_any_lookup() -> None:
    g = guard(domains=["docs.example"])
    decision = await g.decide("https://example.test/")
    assert decision is not None and "example.test is not in the allowed domains (docs.example)" in decision
    assert g.resolve.asked == []  # type: ignore[union-attr]


async def test_the_operator_can_allow_a_private_host_but_not_metadata_by_a_range() -> None:
    g = guard(private=["127.0.0.1", "169.254.0.0/16"])
    assert await g.decide("http://127.0.0.1:8080/") is None
    assert await g.decide("http://metadata.test/") is not None


async def test_refusals_are_kept_for_the_next_observation_and_bounded() -> None:
    g = guard()
    for n in range(MAX_BLOCKED_KEPT + 10):
        g.refuse(f"http://metadata.test/{n}", "blocked", "image")
    taken = g.take_blocked()
    assert len(taken) == MAX_BLOCKED_KEPT
    assert taken[-1] == {
        "url": f"http://metadata.test/{MAX_BLOCKED_KEPT + 9}",
        "kind": "image",
        "reason": "blocked",
    }
    assert g.take_blocked() == []
