"""Hypothesis strategies: Markdown built from a grammar of fragments, and arbitrary text."""

from __future__ import annotations

from hypothesis import strategies as st

_TRICKY = [
    "&",
    "&amp;",
    "<",
    ">",
    "<b>bold?</b>",
    "<script>x</script>",
    "@everyone",
    "@here",
    "<!channel>",
    "<!here>",
    "<@U123>",
    "<#C123>",
    "\\*",
    "\\_",
    "snake_case",
    "a|b",
    "||spoiler||",
    "1.",
    "#tag",
    "-",
    "+",
    "=",
    "`",
    "``",
    "```",
    "~~",
    "🦅",
    "👩‍👩‍👧",
    "e\u0301",
    "漢字",
    '"quoted"',
    "'",
    "https://example.com/a_(b)",
    "end.",
    "Why?",
    "\t",
    "\u200b",
]
_URLS = [
    "https://example.com",
    "https://en.wikipedia.org/wiki/Foo_(bar)",
    "http://x.test/a?b=1&c=2",
    "https://x.test/p|q>r",
    "mailto:a@b.test",
    "tg://user?id=1",
    "relative/path",
    "https://example.com/@everyone",
    "<https://example.com/a b>",
    "javascript:alert(1)",
    "data:image/png;base64,AAAA",
]

_word = st.one_of(
    st.sampled_from(_TRICKY),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
        min_size=1,
        max_size=10,
    ),
    st.from_regex(r"[a-z]{1,8}", fullmatch=True),
)
_url = st.sampled_from(_URLS)


def _inline_extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        inner.map(lambda s: f"**{s}**"),
        inner.map(lambda s: f"*{s}*"),
        inner.map(lambda s: f"_{s}_"),
        inner.map(lambda s: f"~~{s}~~"),
        inner.map(lambda s: f"`{s}`"),
        st.tuples(inner, _url).map(lambda t: f"[{t[0]}]({t[1]})"),
        st.tuples(inner, _url).map(lambda t: f"![{t[0]}]({t[1]})"),
        _url.map(lambda u: f"<{u.strip('<>')}>"),
        st.lists(inner, min_size=1, max_size=6).map(" ".join),
    )


inline = st.recursive(_word, _inline_extend, max_leaves=4)
line = st.lists(inline, min_size=1, max_size=5).map(" ".join)
paragraph = st.lists(line, min_size=1, max_size=3).map(
    lambda lines: "".join(part + ("  \n" if i % 3 == 2 else "\n") for i, part in enumerate(lines)).rstrip()
)
heading = st.tuples(st.integers(1, 6), line).map(lambda t: "#" * t[0] + " " + t[1])
_code_line = st.one_of(
    st.sampled_from(["```", "````", "``` x", "print('`')", "  indented", "", "@everyone", "</pre>"]),
    st.text(max_size=30).map(lambda s: s.replace("\n", " ")),
)
fence = st.tuples(
    st.sampled_from(["", "python", "js", "c++", 'x"y', "<b>"]),
    st.lists(_code_line, min_size=1, max_size=8),
).map(lambda t: "````" + t[0] + "\n" + "\n".join(t[1]) + "\n````")
indented_code = st.lists(
    st.text(min_size=1, max_size=20).map(lambda s: s.replace("\n", " ")), min_size=1, max_size=4
).map(lambda lines: "\n".join("    " + x for x in lines))
_cell = st.one_of(inline, st.just("")).map(lambda s: s.replace("|", "\\|").replace("\n", " "))
table = (
    st.integers(1, 4)
    .flatmap(
        lambda n: st.tuples(
            st.lists(_cell, min_size=n, max_size=n),
            st.lists(st.sampled_from(["---", ":--", "--:", ":-:"]), min_size=n, max_size=n),
            st.lists(st.lists(_cell, min_size=n, max_size=n), max_size=6),
        )
    )
    .map(
        lambda t: "\n".join(
            ["| " + " | ".join(t[0]) + " |", "| " + " | ".join(t[1]) + " |"]
            + ["| " + " | ".join(row) + " |" for row in t[2]]
        )
    )
)
rule = st.sampled_from(["---", "***", "___"])
raw_html = st.sampled_from(["<div>\n*not* html\n</div>", "<!-- comment -->", "<img src=x onerror=alert(1)>"])


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + x if x else x for x in text.split("\n"))


def _block_extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    item = st.lists(inner, min_size=1, max_size=2).map("\n\n".join)
    return st.one_of(
        st.lists(item, min_size=1, max_size=4).map(
            lambda items: "\n".join("- " + _indent(x, "  ").lstrip() for x in items)
        ),
        st.tuples(st.integers(1, 12), st.lists(item, min_size=1, max_size=4)).map(
            lambda t: "\n".join(f"{t[0] + n}. " + _indent(x, "    ").lstrip() for n, x in enumerate(t[1]))
        ),
        st.lists(item, min_size=1, max_size=3).map(
            lambda items: "\n\n".join("- " + _indent(x, "  ").lstrip() for x in items)
        ),
        inner.map(lambda x: _indent(x, "> ").replace("\n\n", "\n>\n")),
    )


block = st.recursive(
    st.one_of(paragraph, heading, fence, indented_code, table, rule, raw_html),
    _block_extend,
    max_leaves=4,
)
grammar_markdown = st.lists(block, min_size=1, max_size=6).flatmap(
    lambda blocks: st.lists(
        st.sampled_from(["\n\n", "\n", "\n\n\n"]), min_size=len(blocks), max_size=len(blocks)
    ).map(lambda seps: "".join(b + s for b, s in zip(blocks, seps, strict=True)))
)
arbitrary_text = st.text(max_size=400)
markdown = st.one_of(
    grammar_markdown, arbitrary_text, st.lists(st.one_of(block, arbitrary_text), max_size=5).map("\n".join)
)
