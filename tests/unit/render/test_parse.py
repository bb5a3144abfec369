"""What the parser does with input that trips it up, and details it decides for the reader."""

from __future__ import annotations

import pytest

from connectors.render import plain_text, render_markdown

PLATFORMS = ("telegram", "slack", "discord", "console")


def only(markdown: str, platform: str) -> str:
    chunks = render_markdown(markdown, platform)  # type: ignore[arg-type]
    assert len(chunks) == 1
    return chunks[0].text


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_backtick_left_open_in_brackets_still_renders(platform: str) -> None:
    # markdown-it-pyrs 0.4 panics on this; the reply is parsed without code spans instead.
    source = "Press [Ctrl+`] to open the terminal, then run `ls`."
    chunks = render_markdown(source, platform)  # type: ignore[arg-type]
    assert "".join(c.plain for c in chunks) == plain_text(source) == source


def test_code_spans_elsewhere_in_such_a_reply_show_their_backticks() -> None:
    html = only("Press [Ctrl+`] to open the terminal, then run `ls`.", "telegram")
    assert html == "Press [Ctrl+`] to open the terminal, then run `ls`."


@pytest.mark.parametrize(
    "source",
    [
        ">" * 60_000 + " deep",  # freeing a syntax tree this deep recursively crashes the process
        "*x " * 200 + "deep" + " x*" * 200,
        "![x " * 300 + "deep" + "](u)" * 300,
        "- " * 2_000 + "deep",
    ],
    ids=["quotes", "emphasis", "images", "lists"],
)
def test_deep_nesting_is_kept_as_text_below_twenty_levels(source: str) -> None:
    for platform in ("telegram", "discord"):
        chunks = render_markdown(source, platform)  # type: ignore[arg-type]
        assert chunks
        assert "".join(c.plain for c in chunks) == plain_text(source)
    assert "deep" in plain_text(source)


def test_an_ordered_list_can_start_at_zero() -> None:
    assert only("0. zero\n1. one", "telegram") == "0. zero\n1. one"


def test_a_blank_line_after_a_nested_list_spaces_the_list_out() -> None:
    assert only("- - a\n\n- ```\n  b\n  ```", "telegram") == "• ◦ a\n\n• <pre>b</pre>"
    assert only("- - a\n- ```\n  b\n  ```", "telegram") == "• ◦ a\n• <pre>b</pre>"


def test_links_to_international_domains_use_the_ascii_host() -> None:
    assert only("[Bücher](https://bücher.de/ä)", "telegram") == (
        '<a href="https://xn--bcher-kva.de/%C3%A4">Bücher</a>'
    )


def test_an_address_shown_as_a_label_is_readable() -> None:
    assert only("![](https://x.test/a%20b/%C3%BC.png)", "telegram") == (
        '<a href="https://x.test/a%20b/%C3%BC.png">https://x.test/a b/ü.png</a>'
    )


def test_whitespace_the_grammar_trims_is_not_content() -> None:
    assert plain_text("\u00a0text\u00a0\n\n\x0b\nmore") == "text\n\nmore"
