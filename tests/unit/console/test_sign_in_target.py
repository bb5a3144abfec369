"""Where signing in leads: back to a console page or a web chat page, never to another site."""

from __future__ import annotations

import pytest

from gateway.http.console.pages import _next


@pytest.mark.parametrize(
    ("asked", "lands"),
    [
        ("/console/threads/7", "/console/threads/7"),
        ("%2Fchat%2Fweb%2F", "/chat/web/"),
        ("/chat/web/", "/chat/web/"),
        ("//evil.example/console/", "/console/"),
        ("https://evil.example/chat/", "/console/"),
        ("/chat\\..\\evil", "/console/"),
        ("/metrics", "/console/"),
        ("", "/console/"),
        (None, "/console/"),
    ],
)
def test_only_console_and_chat_paths_are_followed(asked: str | None, lands: str) -> None:
    assert _next(asked) == lands
