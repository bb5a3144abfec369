"""What the parser does with input that trips it up, and details it decides for the reader."""

from __future__ import annotations

import pytest

from connectors.render import parse, plain_text, render_markdown
from connectors.render.ir import Document, Link, Paragraph, Text

PLATFORMS = ("telegram", "slack", "discord", "console")


def only(markdown: str, platform: str) -> str:
    chunks = render_markdown(markdown, platform)  # type: ignore[arg-type]
    assert len(chunks) == 1
    return chunks[0].text


class PanicException(BaseException):
    """What a Rust panic inside the parser arrives as."""


class _PanickingParser:
    def events(self, source: str) -> None:
        raise PanicException("index out of bounds")


def test_a_parser_panic_keeps_the_reply_as_literal_text(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("connectors.render.syntax._PARSER", _PanickingParser())
    source = "**Hi** <you>\nsecond line\n\n- item"
    assert only(source, "telegram") == "**Hi** &lt;you&gt;\nsecond line\n\n- item"
    assert plain_text(source) == source
    assert "parser failed" in caplog.text


def test_an_interrupt_while_parsing_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    class Interrupting:
        def events(self, source: str) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr("connectors.render.syntax._PARSER", Interrupting())
    with pytest.raises(KeyboardInterrupt):
        render_markdown("text", "telegram")


@pytest.mark.parametrize(
    "source",
    [
        ">" * 60_000 + " deep",
        "*x " * 200 + "deep" + " x*" * 200,
        "![x " * 300 + "deep" + "](u)" * 300,
        "- " * 2_000 + "deep",
    ],
    ids=["quotes", "emphasis", "images", "lists"],
)
def test_deep_nesting_is_kept_as_text_below_twenty_levels(source: str) -> None:
    # Renderers walk the document recursively: it never nests deeper than twenty levels.
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


def test_raw_html_shows_as_written() -> None:
    assert only("a <b>bold</b> <script>x</script>", "telegram") == (
        "a &lt;b&gt;bold&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;"
    )
    # An HTML block runs to the next blank line; Markdown in it shows as written.
    assert only("<div>\n*not* emphasis\n</div>\n\n*emphasis*", "telegram") == (
        "&lt;div&gt;\n*not* emphasis\n&lt;/div&gt;\n\n<i>emphasis</i>"
    )


@pytest.mark.parametrize(
    ("source", "html"),
    [
        ("[click](javascript:alert(1)) me", "[click](javascript:alert(1)) me"),
        ("[**click**](JavaScript:x 'title')", "[<b>click</b>](JavaScript:x 'title')"),
        ("![pic](vbscript:x)", "![pic](vbscript:x)"),
        ("[a][r] and [r]\n\n[r]: file:///etc/passwd", "[a][r] and [r]"),
        ("<javascript:alert(1)>", "&lt;javascript:alert(1)&gt;"),
        ("[![i](data:text/html,x)](https://x.test)", '<a href="https://x.test">![i](data:text/html,x)</a>'),
    ],
)
def test_links_to_scripts_files_and_data_stay_text(source: str, html: str) -> None:
    assert only(source, "telegram") == html


def test_images_in_data_addresses_stay_links() -> None:
    link = Link("data:image/png;base64,AAAA", [Text("dot")], plain_suffix=" (data:image/png;base64,AAAA)")
    assert parse("![dot](data:image/png;base64,AAAA)") == Document([Paragraph([link])])


def test_single_tildes_are_text_and_double_tildes_strike() -> None:
    assert only("about ~5~ minutes, ~~gone~~", "telegram") == "about ~5~ minutes, <s>gone</s>"


def test_an_email_autolink_links_to_mailto() -> None:
    link = Link("mailto:a@b.test", [Text("a@b.test")], auto=True)
    assert parse("<a@b.test>") == Document([Paragraph([link])])
