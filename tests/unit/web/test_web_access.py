"""Web chat access: visitor cookies cannot be made up, sites need token and origin together."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from connectors.web.access import SiteAccess, Visitors, load_key
from gateway.config import WebSite

A = WebSite(token="token-of-site-a-123", origins=["https://a.example"])
B = WebSite(token="token-of-site-b-456", origins=["https://b.example", "http://127.0.0.1:8080"])


def test_a_token_is_good_only_with_its_own_sites_origin() -> None:
    sites = SiteAccess([A, B])
    assert sites.site_for(A.token, "https://a.example")
    assert not sites.site_for(A.token, "https://b.example")
    assert not sites.site_for(A.token, None)
    assert not sites.site_for("token-of-site-a-12", "https://a.example")
    assert not sites.origin_allowed("https://evil.example")
    assert sites.origin_allowed(None)  # a same-origin GET: the cookie decides


def test_a_visitor_cookie_cannot_be_forged_or_moved(tmp_path: Path) -> None:
    key = load_key(tmp_path)
    assert load_key(tmp_path) == key  # kept: visitors keep their chats across restarts
    assert (tmp_path / "web-chat.key").stat().st_mode & 0o077 == 0
    visitors = Visitors("web", key)
    visitor, cookie = visitors.new()
    assert visitors.visitor_of(cookie) == visitor
    other, _ = visitors.new()
    assert other != visitor
    signature = cookie.split(".")[1]
    assert visitors.visitor_of(f"{other}.{signature}") is None
    assert visitors.visitor_of(cookie + "x") is None
    assert visitors.visitor_of("") is None
    assert Visitors("other-channel", key).visitor_of(cookie) is None
    assert Visitors("web", b"k" * 32).visitor_of(cookie) is None


def test_a_site_names_origins_not_pages() -> None:
    with pytest.raises(ValidationError, match="is not an origin"):
        WebSite(token="t" * 20, origins=["https://a.example/page"])
    with pytest.raises(ValidationError, match="at least 16"):
        WebSite(token="short", origins=["https://a.example"])
