"""Exact output for a tricky reply, one file per platform under ``golden/``.

Set ``TALON_UPDATE_GOLDEN=1`` to rewrite the files after an intended change, then review
the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors.render import plain_text, render_markdown

GOLDEN = Path(__file__).parent / "golden"
SOURCE = (GOLDEN / "tricky.md").read_text(encoding="utf-8")
UPDATE = os.environ.get("TALON_UPDATE_GOLDEN") == "1"


def _compare(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("platform", "file", "fmt"),
    [
        ("telegram", "tricky.telegram.html", "html"),
        ("slack", "tricky.slack.txt", "mrkdwn"),
        ("discord", "tricky.discord.md", "markdown"),
        ("console", "tricky.console.md", "markdown"),
    ],
)
def test_tricky_sample_renders_exactly(platform: str, file: str, fmt: str) -> None:
    chunks = render_markdown(SOURCE, platform)  # type: ignore[arg-type]
    assert len(chunks) == 1
    assert chunks[0].format == fmt
    _compare(file, chunks[0].text)
    assert chunks[0].plain == plain_text(SOURCE)


def test_tricky_sample_plain_text() -> None:
    _compare("tricky.plain.txt", plain_text(SOURCE))
