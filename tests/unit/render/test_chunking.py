"""Where long replies are cut: blocks first, then lines, sentences, words, characters."""

from __future__ import annotations

from connectors.render import (
    DISCORD_LIMIT,
    TELEGRAM_LIMIT,
    parse,
    plain_text,
    render_document,
    render_markdown,
    utf16_len,
)


def texts(markdown: str, platform: str, limit: int) -> list[str]:
    chunks = render_document(parse(markdown), platform, limit)  # type: ignore[arg-type]
    assert "".join(c.plain for c in chunks) == plain_text(markdown)
    for chunk in chunks:
        assert utf16_len(chunk.text) <= limit
    return [c.text for c in chunks]


def test_utf16_len_counts_astral_characters_twice() -> None:
    assert utf16_len("a🦅é") == 4
    assert utf16_len("") == 0


def test_telegram_limit_is_counted_in_utf16_units() -> None:
    chunks = render_markdown("🦅" * 3000, "telegram")  # 3,000 characters, 6,000 units
    assert [utf16_len(c.text) for c in chunks] == [TELEGRAM_LIMIT, 6000 - TELEGRAM_LIMIT]
    assert all(len(c.text) < 2100 for c in chunks)


def test_escaping_counts_towards_the_telegram_limit() -> None:
    chunks = render_markdown("&" * 1000, "telegram")  # 5,000 characters once escaped
    assert len(chunks) == 2
    assert all(utf16_len(c.text) <= TELEGRAM_LIMIT for c in chunks)


def test_blocks_are_packed_whole_into_messages() -> None:
    paragraphs = [f"Paragraph {n} " + "word " * 10 for n in range(6)]
    out = texts("\n\n".join(paragraphs), "discord", 150)
    assert out == ["\n\n".join(p.strip() for p in paragraphs[i : i + 2]) for i in (0, 2, 4)]


def test_a_long_paragraph_is_cut_at_lines_then_sentences_then_words() -> None:
    lines = "\n".join(f"Line {n} says something short." for n in range(8))
    assert texts(lines, "discord", 100) == [
        "Line 0 says something short.\nLine 1 says something short.\nLine 2 says something short.",
        "Line 3 says something short.\nLine 4 says something short.\nLine 5 says something short.",
        "Line 6 says something short.\nLine 7 says something short.",
    ]
    sentences = " ".join(f"Sentence {n} is here." for n in range(6))
    assert texts(sentences, "discord", 60) == [
        "Sentence 0 is here. Sentence 1 is here. Sentence 2 is here.",
        "Sentence 3 is here. Sentence 4 is here. Sentence 5 is here.",
    ]
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    assert texts(words, "discord", 40) == [
        "alpha beta gamma delta epsilon zeta eta",
        "theta iota kappa lambda mu",
    ]
    assert texts("x" * 90, "discord", 40) == ["x" * 40, "x" * 40, "x" * 10]


def test_formatting_is_closed_and_reopened_around_a_cut() -> None:
    out = texts("**" + ("bold words here " * 6).strip() + "**", "telegram", 60)
    assert len(out) >= 2
    assert all(t.startswith("<b>") and t.endswith("</b>") for t in out)
    out = texts("[" + "label " * 12 + "](https://x.test/page)", "discord", 64)
    assert all(t.startswith("[") and t.endswith("](https://x.test/page)") for t in out)


def test_a_cut_link_shows_its_address_once_in_plain_text() -> None:
    chunks = render_document(parse("[" + "label " * 12 + "](https://x.test/p)"), "telegram", 80)
    assert len(chunks) >= 2
    assert [c.plain.count("https://x.test/p") for c in chunks] == [0] * (len(chunks) - 1) + [1]


def test_a_code_block_is_cut_only_when_it_alone_is_too_long() -> None:
    code = "\n".join(f"line_{n} = {n}" for n in range(30))
    source = "Intro paragraph.\n\n```python\n" + code + "\n```\n\nOutro."
    out = texts(source, "discord", 200)
    assert out[0] == "Intro paragraph."  # the code block starts a message rather than being cut early
    code_parts = [t for t in out if "line_" in t]
    assert len(code_parts) >= 2
    for part in code_parts:  # every part is a complete python block
        assert part.startswith("```python\n") and part.split("\n\n")[0].endswith("\n```")
    joined = [line for part in code_parts for line in part.split("\n") if line.startswith("line_")]
    assert joined == code.split("\n")


def test_code_block_that_fits_is_never_cut() -> None:
    code = "```sh\n" + "echo hi\n" * 20 + "```"
    out = texts("para " * 30 + "\n\n" + code, "telegram", 250)
    assert sum("echo hi" in t for t in out) == 1
    assert '<pre><code class="language-sh">' + "echo hi\n" * 19 + "echo hi</code></pre>" in out


def test_long_lists_are_cut_between_items_and_keep_their_numbers() -> None:
    source = "\n".join(f"{n}. item number {n}" for n in range(1, 13))
    out = texts(source, "telegram", 64)
    assert out[0].startswith("1. item number 1\n")
    assert out[1].startswith(f"{out[0].count(chr(10)) + 2}. item number")
    assert all(t.split("\n")[0][0].isdigit() for t in out)


def test_a_cut_table_keeps_its_columns_aligned() -> None:
    rows = "".join(f"| row {n} | {n * 1000} |\n" for n in range(20))
    out = texts("| name | value |\n|:--|--:|\n" + rows, "discord", 120)
    assert len(out) >= 3
    assert out[0].startswith("```\nname   | value\n-------+------\nrow 0  |     0")
    assert all(t.startswith("```\nrow") for t in out[1:])
    assert "row 19 | 19000\n```" in out[-1]


def test_default_limits() -> None:
    assert all(utf16_len(c.text) <= DISCORD_LIMIT for c in render_markdown("word " * 2000, "discord"))
    assert len(render_markdown("word " * 2000, "slack")) == 1
    assert len(render_markdown("word " * 2000, "console")) == 1
