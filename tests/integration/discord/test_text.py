"""How message text and attachment notes read."""

from __future__ import annotations

import pytest

from connectors.discord_bot.inbound import human_size, normalize_text, safe_filename


class _User:
    def __init__(self, user_id: int, name: str) -> None:
        self.id = user_id
        self.display_name = name


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<@42> hello", "hello"),
        ("<@!42> <@42>  /stop", "/stop"),
        ("/new@talonbot", "/new"),
        ("/stop@OtherName now", "/stop now"),
        ("/deploy@TalonBot prod", "/deploy prod"),
        ("/deploy@someone-else prod", "/deploy@someone-else prod"),
        ("ask <@42> about <@7>", "ask @talonbot about @Bob"),
        ("unknown <@8>", "unknown <@8>"),
    ],
)
def test_normalize_text(content: str, expected: str) -> None:
    assert normalize_text(content, bot_id=42, bot_name="talonbot", mentions=[_User(7, "Bob")]) == expected  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1500, "1.5 KB"),
        (20_000_000, "20 MB"),
        (30_500_000, "30.5 MB"),
        (3 * 10**9, "3 GB"),
    ],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


def test_safe_filename_keeps_files_inside_their_folder() -> None:
    assert safe_filename("../../etc/passwd") == "_.._etc_passwd"
    assert safe_filename("...") == "file"
    assert safe_filename("report final.pdf") == "report final.pdf"
