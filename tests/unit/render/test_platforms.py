"""What each platform's output looks like, and what model output can never do there."""

from __future__ import annotations

import pytest

from connectors.render import parse, plain_text, render_markdown, render_platforms
from connectors.render.plain import plain_document
from tests.unit.render.checks import (
    slack_errors,
    telegram_html_errors,
    telegram_visible_text,
    unbalanced_fence,
)


def one(markdown: str, platform: str) -> str:
    chunks = render_markdown(markdown, platform)  # type: ignore[arg-type]
    assert len(chunks) == 1
    return chunks[0].text


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "console"])
@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n"])
def test_blank_text_gives_no_chunks(platform: str, text: str) -> None:
    assert render_markdown(text, platform) == []  # type: ignore[arg-type]


def test_unknown_platform_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown platform 'irc'"):
        render_markdown("hi", "irc")  # type: ignore[arg-type]


# Telegram


def test_telegram_raw_html_from_the_model_is_shown_as_text() -> None:
    html = one('<b onclick="x()">hi</b> <script>alert(1)</script> & <tg-spoiler>s</tg-spoiler>', "telegram")
    assert "<b" not in html and "<script" not in html and "<tg-spoiler" not in html
    assert (
        telegram_visible_text(html)
        == '<b onclick="x()">hi</b> <script>alert(1)</script> & <tg-spoiler>s</tg-spoiler>'
    )


def test_telegram_structure() -> None:
    html = one("## Title\n\n- a\n- b\n\n3. three\n4. four\n\n> quoted\n\n---", "telegram")
    assert html == ("<b>Title</b>\n\n• a\n• b\n\n3. three\n4. four\n\n<blockquote>quoted</blockquote>\n\n———")


def test_telegram_links_keep_parentheses_and_escape_quotes() -> None:
    html = one('[wiki](https://en.wikipedia.org/wiki/Foo_(bar)) [q](https://x.test/?a="b"&c)', "telegram")
    assert '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">wiki</a>' in html
    assert '<a href="https://x.test/?a=%22b%22&amp;c">q</a>' in html


def test_telegram_links_it_cannot_open_are_text() -> None:
    html = one("[me](tg://user?id=42) [rel](docs/x.md) ![pic](https://x.test/p.png)", "telegram")
    assert html == 'me (tg://user?id=42) rel (docs/x.md) <a href="https://x.test/p.png">pic</a>'


def test_telegram_code_keeps_its_language_and_escapes() -> None:
    html = one("```c++\nif (a < b && c > d) {}\n```\n\n`<i>` **`bold code`**", "telegram")
    assert html == (
        '<pre><code class="language-c++">if (a &lt; b &amp;&amp; c &gt; d) {}</code></pre>\n\n'
        "<code>&lt;i&gt;</code> <b><code>bold code</code></b>"
    )


@pytest.mark.parametrize("opening", ["", "intro\n   "])
def test_telegram_code_in_a_list_item_keeps_its_indentation(opening: str) -> None:
    html = one(f"1. {opening}```py\n   a = 1\n       b = 2\n   ```\n2. next", "telegram")
    code = html.split("<code", 1)[1].split("</code>", 1)[0]
    assert code.split(">", 1)[1] == "a = 1\n    b = 2"


def test_telegram_nested_quotes_merge_and_code_in_links_is_plain() -> None:
    html = one("> outer\n> > inner\n\n[`code` label](https://x.test)", "telegram")
    assert html == '<blockquote>outer\n\ninner</blockquote>\n\n<a href="https://x.test">code label</a>'
    assert telegram_html_errors(html) == []


def test_telegram_table_is_aligned_monospace() -> None:
    html = one("| a | long header |\n|--:|:--|\n| 1 | x & y |\n| 100 | z |", "telegram")
    assert html == "<pre>  a | long header\n----+------------\n  1 | x &amp; y\n100 | z</pre>"


# Slack


@pytest.mark.parametrize(
    "markdown",
    [
        "<!channel> <!here> <!everyone> <@U123> <#C123> <!subteam^S1>",
        "[<!channel>](https://x.test) [x](https://x.test/|<!here>)",
        "<https://x.test/a|<!channel>>",
        "`<!here>` and\n\n```\n<@U123>\n```",
        "| <!channel> |\n|---|\n| <@U1> |",
        "**<!here>** _<#C1>_ ~~<@U2>~~",
    ],
)
def test_slack_model_output_cannot_mention(markdown: str) -> None:
    text = one(markdown, "slack")
    assert slack_errors(text) == [], text


def test_slack_link_url_cannot_break_out() -> None:
    text = one("[label](https://x.test/a|b>c<!channel>) and <https://x.test/?q=a&b=c>", "slack")
    assert text == "<https://x.test/a%7Cb%3Ec%3C!channel%3E|label> and <https://x.test/?q=a&amp;b=c>"


def test_slack_formatting() -> None:
    text = one("# Head\n\n**b** *i* ~~s~~ `c` [l](https://x.test)\n\n```python\nx = 1\n```", "slack")
    assert text == "*Head*\n\n*b* _i_ ~s~ `c` <https://x.test|l>\n\n```\nx = 1\n```"


def test_slack_table_is_a_code_block() -> None:
    assert one("| a | b |\n|---|---|\n| 1 | 2 |", "slack") == "```\na   | b\n----+----\n1   | 2\n```"


# Discord


def test_discord_headings_tables_and_quotes() -> None:
    text = one("# One\n## Two\n### Three\n#### Four\n\n| a |\n|---|\n| 1 |\n\n> a\n> > b", "discord")
    assert text == "# One\n\n## Two\n\n### Three\n\n**Four**\n\n```\na\n---\n1\n```\n\n> a\n> \n> b"


@pytest.mark.parametrize(
    "markdown",
    [
        "hi @everyone and @here",
        "[@everyone](https://x.test/@here)",
        "`@everyone`\n\n```\n@here\n```",
        "| @everyone |\n|---|\n| @here |",
    ],
)
def test_discord_mass_mentions_are_neutralized(markdown: str) -> None:
    text = one(markdown, "discord")
    assert "@everyone" not in text and "@here" not in text
    assert "@\u200beveryone" in text or "@\u200bhere" in text


def test_discord_code_containing_fences_stays_balanced() -> None:
    text = one("````\n```\nnot closed\n````\n\n`` a```b ``", "discord")
    assert unbalanced_fence(text) is None
    assert text.startswith("```\n`\u200b`\u200b`\nnot closed\n```")


def test_discord_escapes_markdown_in_text() -> None:
    text = one(r"2 \* 3 \_x\_ snake_case \<@123> \# not heading", "discord")
    assert text == r"2 \* 3 \_x\_ snake_case \<@123\> # not heading"
    text = one("a\\\n\\# b\n\\- c\n1\\. d", "discord")
    assert text == "a\n\\# b\n\\- c\n1\\. d"


# Console and plain text


def test_console_output_reads_back_as_the_same_document() -> None:
    source = (
        "# T\n\nA *b* **c** `d` [e](https://x.test/(f)) \\* \\_ 1\\. <g>\n\n"
        "- x\n  - y\n\n> q\n\n```py\n```inner\n```x\n\n| h | i |\n|---|---|\n| `a|b` | c |\n"
    )
    text = one(source, "console")
    assert plain_document(parse(text)) == plain_text(source)
    assert unbalanced_fence(text) is None


def test_plain_twin_shows_link_addresses_and_no_markup() -> None:
    chunks = render_markdown("**Go** to [docs](https://x.test/d) or <https://x.test>.", "telegram")
    assert chunks[0].plain == "Go to docs (https://x.test/d) or https://x.test."


def test_render_platforms_parses_once_for_all() -> None:
    out = render_platforms("**hi**")
    assert {p: [c.text for c in chunks] for p, chunks in out.items()} == {
        "telegram": ["<b>hi</b>"],
        "slack": ["*hi*"],
        "discord": ["**hi**"],
        "console": ["**hi**"],
    }


@pytest.mark.parametrize(
    "text",
    [
        "\x00\ud800\udfff",
        ">" * 500 + " deep",
        "[" * 3000,
        "*" * 3000,
        "`" * 3000,
        "- " * 400 + "x",
        "\r\n\r\n# a\r\n\r\n",
        "<" * 1000,
        "&#0; &#xD800; &bogus; &amp",
    ],
)
def test_hostile_input_never_raises(text: str) -> None:
    for platform in ("telegram", "slack", "discord", "console"):
        chunks = render_markdown(text, platform)  # type: ignore[arg-type]
        assert "".join(c.plain for c in chunks) == plain_text(text)


def test_a_rendering_bug_still_delivers_the_reply_as_escaped_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(markdown: str) -> None:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr("connectors.render.parse", broken)
    chunks = render_markdown("**hi** <b>", "telegram")
    assert [(c.text, c.plain) for c in chunks] == [("**hi** &lt;b&gt;", "**hi** <b>")]
