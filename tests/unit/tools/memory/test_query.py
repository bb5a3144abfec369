"""The memory_search query language: FTS5's operators parse into a tree, and every malformed,
oversized or hostile query is refused with a message that says what to send instead."""

from __future__ import annotations

import pytest

from gateway.memory_query import MAX_QUERY_CHARS, MAX_TERMS, And, Not, Or, QueryError, Term, parse_query


def test_operators_parse_with_fts5_precedence() -> None:
    assert parse_query("deploy").root == Term("deploy")
    assert parse_query("deploy friday").root == And((Term("deploy"), Term("friday")))
    assert parse_query("a OR b c").root == Or((Term("a"), And((Term("b"), Term("c")))))
    assert parse_query("a NOT b OR c").root == Or((Not(Term("a"), Term("b")), Term("c")))
    assert parse_query("(a OR b) AND c").root == And((Or((Term("a"), Term("b"))), Term("c")))
    assert parse_query('"exact  phrase" migrat*').root == And((Term("exact phrase"), Term("migrat", True)))
    assert parse_query('"say ""hi"""').root == Term('say "hi"')
    assert parse_query('"dark mo"*').root == Term("dark mo", True)


def test_fts5_syntax_it_does_not_offer_is_taken_as_text() -> None:
    # A column filter, a start anchor and lower-case operators are words, never syntax.
    assert parse_query("tags:t1").root == Term("tags:t1")
    assert parse_query("^start and or").root == And((Term("^start"), Term("and"), Term("or")))
    assert parse_query("NEAR(a b)").root == And((Term("NEAR"), And((Term("a"), Term("b")))))


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("", "the query is empty"),
        ("   ", "the query is empty"),
        ("releases AND", "ends with an operator"),
        ("OR releases", "OR needs a term on each side"),
        ("NOT pears", "NOT is binary"),
        ("a AND OR b", "OR needs a term on each side"),
        ('"unclosed phrase', "unclosed quote"),
        ("(a OR b", "'(' without its ')'"),
        ("a OR b)", "')' without its '('"),
        ("()", "empty '()'"),
        ("*", "a * must follow a word"),
        ("--- ...", "has no letters or digits"),
        ("a*", "a prefix needs at least 2 letters"),
        ("((((( a )))))", "nests parentheses deeper than"),
        ("x" * 101, "too long"),
        (" ".join(["w"] * (MAX_TERMS + 1)), f"more than {MAX_TERMS} terms"),
        ("a" * (MAX_QUERY_CHARS + 1), f"keep it under {MAX_QUERY_CHARS}"),
    ],
)
def test_bad_queries_say_what_to_send(query: str, says: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(query)
    assert says in str(caught.value)


def test_a_hostile_query_is_bounded_before_it_reaches_the_index() -> None:
    with pytest.raises(QueryError):
        parse_query("(" * 10_000)
    with pytest.raises(QueryError):
        parse_query('"' * 400)
