"""Replies on the web chat page: Markdown becomes HTML that cannot run anything."""

from __future__ import annotations

import re

import pytest

from connectors.web.html import ALLOWED_TAGS, render_chunks, to_html

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](  javascript:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](vbscript:msgbox(1))",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=https://example.com></iframe>",
    '![x" onerror="alert(1)](https://example.com/a.png)',
    "<svg onload=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    '[x](https://example.com "t" onmouseover=alert(1))',
    "<!-- <script>alert(1)</script> -->",
]


@pytest.mark.parametrize("markdown", HOSTILE)
def test_hostile_markdown_is_inert(markdown: str) -> None:
    html = to_html(markdown)
    tags = set(re.findall(r"<([a-zA-Z0-9]+)", html))
    assert tags <= ALLOWED_TAGS
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", html, re.IGNORECASE)  # no event handler attribute
    for href in re.findall(r'<a\s[^>]*href="([^"]*)"', html):
        assert href.startswith(("http://", "https://", "mailto:")), href
    assert "<script" not in html.lower() and "<img" not in html.lower()


def test_markdown_keeps_its_formatting() -> None:
    html = to_html("# Title\n\n**bold** _it_ ~~gone~~ `code` [site](https://example.com)\n\n- a\n- b\n")
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html and "<s>gone</s>" in html
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">site</a>' in html
    assert "<li>a</li>" in html


def test_html_in_a_reply_is_shown_as_text() -> None:
    assert to_html("use <b>bold</b> tags") == "<p>use &lt;b&gt;bold&lt;/b&gt; tags</p>\n"


def test_an_image_becomes_a_link_so_no_browser_fetches_it() -> None:
    assert to_html("![chart](https://example.com/c.png)") == (
        '<p><a href="https://example.com/c.png" target="_blank" rel="noopener noreferrer nofollow">chart</a></p>\n'
    )


def test_a_reply_is_one_chunk_with_a_plain_twin() -> None:
    (chunk,) = render_chunks("**hi** there")
    assert chunk.format == "html" and chunk.plain == "hi there"
    assert render_chunks("   ") == []
