"""A reply that is not blank always reaches the chat: text that shows nothing as Markdown
is sent as written."""

from __future__ import annotations

import json
import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.render import LIMITS, plain_text, render_markdown, utf16_len
from gateway.logs import JsonFormatter, TextFormatter
from tests.unit.render.checks import telegram_visible_text

PLATFORMS = ("telegram", "slack", "discord", "console")

# Text with nothing to show as Markdown: a fence that is never filled, empty fences in
# quotes nested ever deeper, link definitions nobody refers to.
SHOWS_NOTHING = [
    "`" * 100_000,
    "> > > ```\n> > > ```\n>\n> ~~~\n> ~~~",
    "\n".join(">" * depth + " ```\n" + ">" * depth + " ```" for depth in range(1, 30)),
    "[ref]: https://example.com\n[other]: https://example.org 'title'",
]


def shown(chunk_text: str, platform: str) -> str:
    """What the chat shows for a chunk: Telegram HTML and Slack mrkdwn decoded, Markdown
    read back (its escapes make the text literal)."""
    if platform == "telegram":
        return telegram_visible_text(chunk_text)
    if platform == "slack":
        return chunk_text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return plain_text(chunk_text)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize(
    "text", SHOWS_NOTHING, ids=["backticks", "quoted fences", "nested fences", "link definitions"]
)
def test_text_that_shows_nothing_as_markdown_is_sent_as_written(text: str, platform: str) -> None:
    chunks = render_markdown(text, platform)  # type: ignore[arg-type]
    assert chunks, "the reply was dropped"
    for chunk in chunks:
        assert 0 < utf16_len(chunk.text) <= LIMITS[platform]  # type: ignore[index]
    assert "".join(chunk.plain for chunk in chunks) == text.strip() == plain_text(text)
    visible = "".join(shown(chunk.text, platform) for chunk in chunks)
    assert "".join(visible.split()) == "".join(text.split())


def test_telegram_counts_the_fallback_in_utf16_units() -> None:
    text = "[ref]: https://example.com\n" + "[🦅]: https://example.com/eagle\n" * 300  # 2 units an eagle
    chunks = render_markdown(text, "telegram")
    assert len(chunks) >= 3
    assert all(utf16_len(chunk.text) <= LIMITS["telegram"] for chunk in chunks)
    assert any(len(chunk.text) < utf16_len(chunk.text) for chunk in chunks)


def test_the_fallback_is_logged_and_the_record_formats(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="talon.render"):
        render_markdown("`" * 1000, "discord")
    (record,) = caplog.records
    assert "sent as written" in record.getMessage()
    assert json.loads(JsonFormatter().format(record))["reply_chars"] == 1000
    assert "1000 characters" in TextFormatter().format(record)


# Any text. The alphabet leaves out what brings in text that is not shown by design:
# ``&`` (entity names), ``:`` (link definitions), ``(`` (link titles and destinations), ``"``
# and ``|`` (table cells beyond the header's). What remains shows every letter but those of
# an info string after a code fence's backticks or tildes (``` ```python ```), which names the
# language and is not shown.
_MARKUP = "*_~`#>-+=[]!\\<>.{}"
_FRAGMENTS = ["```", "~~~", "> ", "- ", "1. ", "    ", "\n", "\n\n", "---", "===", "<b>", "</b>", "\\"]
any_text = st.lists(
    st.one_of(
        st.sampled_from(_FRAGMENTS),
        st.text(alphabet=st.sampled_from("abcXYZ019 \t\n" + _MARKUP), min_size=1, max_size=12),
    ),
    max_size=30,
).map("".join)
_FENCE_INFO = re.compile(r"(?:`{3,}|~{3,})[^\n]*")
_LETTERS = re.compile(r"[A-Za-z]")


def _letters(text: str) -> list[str]:
    return _LETTERS.findall(text)


def _is_subsequence(short: list[str], long: list[str]) -> bool:
    rest = iter(long)
    return all(letter in rest for letter in short)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text)
def test_every_reply_that_is_not_blank_shows_all_of_its_letters(text: str) -> None:
    sure = _letters(_FENCE_INFO.sub("", text))  # letters that are no fence's info string
    for platform in PLATFORMS:
        chunks = render_markdown(text, platform)  # type: ignore[arg-type]
        if not text.strip():
            assert chunks == []
            continue
        assert chunks, (platform, "the reply was dropped")
        assert all(chunk.text.strip() for chunk in chunks)
        plain = "".join(chunk.plain for chunk in chunks)
        assert plain == plain_text(text)
        # Nothing is lost but markup and info strings, nothing added, nothing reordered.
        shown_letters = _letters(plain)
        assert _is_subsequence(sure, shown_letters), (platform, plain)
        assert _is_subsequence(shown_letters, _letters(text)), (platform, plain)
