"""Properties that hold for any Markdown: limits, well-formed markup, faithful plain twins."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.render import LIMITS, parse, plain_text, render_document, render_markdown, utf16_len
from connectors.render.ir import Document
from connectors.render.plain import plain_document
from tests.unit.render.checks import slack_errors, telegram_html_errors, unbalanced_fence
from tests.unit.render.strategies import markdown

PLATFORMS = ("telegram", "slack", "discord", "console")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Small limits make nearly every example need cutting, down to single words and characters.
limits = st.one_of(st.sampled_from([32, 64, 100, 400]), st.integers(32, 1000), st.none())


def _check_chunks(document: Document, platform: str, limit: int | None) -> None:
    chunks = render_document(document, platform, limit)  # type: ignore[arg-type]
    bound = LIMITS[platform] if limit is None else limit  # type: ignore[index]
    for chunk in chunks:
        assert utf16_len(chunk.text) <= bound, (platform, chunk.text, bound)
        assert chunk.text.strip(), (platform, "empty message")
        assert chunk.plain.strip(), (platform, "empty plain twin")
        if platform == "telegram":
            assert chunk.format == "html"
            assert telegram_html_errors(chunk.text) == [], chunk.text
        elif platform == "slack":
            assert chunk.format == "mrkdwn"
            assert slack_errors(chunk.text) == [], chunk.text
        else:
            assert chunk.format == "markdown"
            assert unbalanced_fence(chunk.text) is None, chunk.text
        if platform == "discord":
            assert "@everyone" not in chunk.text and "@here" not in chunk.text
    assert "".join(chunk.plain for chunk in chunks) == plain_document(document), platform


@SETTINGS
@given(markdown, limits)
def test_chunks_on_every_platform(source: str, limit: int | None) -> None:
    # one generated document, checked on all four platforms (generation is the slow part)
    document = parse(source)
    for platform in PLATFORMS:
        _check_chunks(document, platform, limit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown)
def test_public_api_never_raises_and_matches_plain_text(source: str) -> None:
    for platform in PLATFORMS:
        chunks = render_markdown(source, platform)  # type: ignore[arg-type]
        assert "".join(chunk.plain for chunk in chunks) == plain_text(source)
        if not source.strip():
            assert chunks == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown)
def test_console_markdown_reads_back_as_the_same_text(source: str) -> None:
    # Escaping is complete when parsing the console output again shows the same text
    # (whitespace aside: list looseness and hard breaks may be spelled differently).
    document = parse(source)
    rendered = "\n\n".join(c.text for c in render_document(document, "console"))
    again = plain_document(parse(rendered))
    assert "".join(again.split()) == "".join(plain_document(document).split())
