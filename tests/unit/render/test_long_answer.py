"""A 10,000-character answer: paragraphs, code blocks (one longer than a message) and a table."""

from __future__ import annotations

import re

from connectors.render import DISCORD_LIMIT, TELEGRAM_LIMIT, plain_text, render_markdown, utf16_len
from tests.unit.render.checks import telegram_html_errors, unbalanced_fence

PARAGRAPH = (
    "The scheduler keeps **durable** state in SQLite, so a restart never loses a job. "
    "Each run is leased; when a lease expires the run is retried & the attempt is logged. "
    "Eagles 🦅 fly over the `queue_items` table.\n"
)
SMALL_CODE = '```js\nconst ok = await send("hello");\nconsole.log(ok);\n```\n'
BIG_CODE_LINES = [f"    result_{n} = compute(value_{n}, factor={n})  # step {n}" for n in range(90)]
BIG_CODE = "```python\ndef pipeline(value):\n" + "\n".join(BIG_CODE_LINES) + "\n    return result_0\n```\n"
TABLE = "| Job | Runs | State |\n|:--|--:|:--|\n" + "".join(
    f"| job-{n} | {n * 7} | {'ok' if n % 3 else 'retrying'} |\n" for n in range(12)
)


def long_answer() -> str:
    parts = ["# Scheduler report\n", PARAGRAPH * 3, SMALL_CODE, PARAGRAPH * 4, BIG_CODE, TABLE]
    parts += [PARAGRAPH * 2, SMALL_CODE, PARAGRAPH * 6]
    text = "\n".join(parts)
    while len(text) < 10_000:
        text += "\n" + PARAGRAPH
    return text


ANSWER = long_answer()


def test_answer_is_the_size_the_test_claims() -> None:
    assert 10_000 <= len(ANSWER) < 11_000
    assert len(BIG_CODE) > TELEGRAM_LIMIT > DISCORD_LIMIT


def test_telegram_chunks_fit_and_reopen_code_with_its_language() -> None:
    chunks = render_markdown(ANSWER, "telegram")
    assert len(chunks) >= 3
    for chunk in chunks:
        assert utf16_len(chunk.text) <= TELEGRAM_LIMIT
        assert telegram_html_errors(chunk.text) == []
    big = [c for c in chunks if "result_1 = " in c.text or "result_89 = " in c.text]
    assert len(big) >= 2  # the 5,000-character function was cut...
    for chunk in big:  # ...and every part is a complete Python block
        assert '<pre><code class="language-python">' in chunk.text
    code = "".join(
        m for c in big for m in re.findall(r'<code class="language-python">(.*?)</code>', c.text, re.S)
    )
    assert all(line.replace("&amp;", "&") in code for line in BIG_CODE_LINES)
    small = [c for c in chunks if 'class="language-js"' in c.text]
    assert all("console.log(ok);</code></pre>" in c.text for c in small)  # small blocks stay whole
    assert "".join(c.plain for c in chunks) == plain_text(ANSWER)


def test_discord_chunks_fit_balance_fences_and_reopen_code() -> None:
    chunks = render_markdown(ANSWER, "discord")
    assert len(chunks) >= 6
    for chunk in chunks:
        assert utf16_len(chunk.text) <= DISCORD_LIMIT
        assert unbalanced_fence(chunk.text) is None
    parts = [c.text for c in chunks if "result_" in c.text]
    assert len(parts) >= 3
    for text in parts:
        assert text.count("```python\n") == 1 and text.rstrip().endswith("```")
    lines = [line for text in parts for line in text.split("\n") if "result_" in line]
    assert [line.strip() for line in lines if "= compute" in line] == [x.strip() for x in BIG_CODE_LINES]
    table = next(c.text for c in chunks if "job-0 " in c.text)
    assert "```\nJob    | Runs | State" in table
    assert "".join(c.plain for c in chunks) == plain_text(ANSWER)


def test_slack_keeps_the_answer_in_one_message() -> None:
    chunks = render_markdown(ANSWER, "slack")
    assert len(chunks) == 1
    assert "```\ndef pipeline(value):" in chunks[0].text  # no language tag after the fence
    assert chunks[0].plain == plain_text(ANSWER)
