"""The query language of ``memory_search``: FTS5's, parsed here so that a model's query is
bounded and every mistake is reported in words instead of a database error.

Accepted: words, ``"exact phrases"`` (``""`` inside stands for a quote), ``prefix*`` (and
``"a phrase"*``), ``AND``, ``OR``, ``NOT`` (upper case, as in FTS5; ``NOT`` is binary:
``apples NOT pears``), parentheses, and words side by side meaning AND. Precedence as in FTS5:
NOT, then AND, then OR. Anything else a word contains (``:``, ``^``, ``-``, ...) is taken as
text, never as syntax, so column filters and the like cannot reach the index.

The result is a small tree (:class:`Query`) that a store backend renders in its own syntax.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import RefusedError

__all__ = [
    "MAX_DEPTH",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "And",
    "Node",
    "Not",
    "Or",
    "Query",
    "QueryError",
    "Term",
    "parse_query",
]

MAX_QUERY_CHARS = 500
MAX_TERMS = 16
MAX_DEPTH = 4
MAX_TERM_CHARS = 100
MIN_PREFIX_CHARS = 2
_OPERATORS = ("AND", "OR", "NOT")
_EXAMPLE = 'e.g. deploy AND (friday OR weekend), "exact phrase", migrat*'


class QueryError(RefusedError):
    """The query cannot be searched; the message says what to send instead."""


@dataclass(frozen=True, slots=True)
class Term:
    """A word or phrase to match; ``prefix``: also words that start with it."""

    text: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    left: Node
    right: Node


Node = Term | And | Or | Not


@dataclass(frozen=True, slots=True)
class Query:
    root: Node
    terms: int


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # term | op | ( | )
    value: str = ""
    prefix: bool = False


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "()":
            out.append(_Token(c))
            i += 1
        elif c == '"':
            i, phrase = _phrase(text, i)
            prefix = i < n and text[i] == "*"
            out.append(_Token("term", phrase, prefix))
            i += 1 if prefix else 0
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '()"':
                j += 1
            word = text[i:j]
            i = j
            if word in _OPERATORS:
                out.append(_Token("op", word))
            elif word.endswith("*"):
                out.append(_Token("term", word.rstrip("*"), True))
            else:
                out.append(_Token("term", word))
    return out


def _phrase(text: str, start: int) -> tuple[int, str]:
    """The quoted phrase at ``start`` and the index after its closing quote."""
    parts, i = [], start + 1
    while True:
        end = text.find('"', i)
        if end < 0:
            raise QueryError(
                f"the query has an unclosed quote (from {text[start : start + 30]!r}); close the phrase "
                'with " or leave the quote out'
            )
        parts.append(text[i:end])
        if text.startswith('""', end):
            parts.append('"')
            i = end + 2
            continue
        return end + 1, "".join(parts)


class _Parser:
    def __init__(self, tokens: list[_Token]):
        self.tokens = tokens
        self.at = 0
        self.terms = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def parse(self) -> Node:
        node = self.or_expr()
        extra = self.peek()
        if extra is not None:
            raise QueryError("the query has a ')' without its '('; remove it or add the '(' before it")
        return node

    def or_expr(self) -> Node:
        parts = [self.and_expr()]
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.value == "OR":
            self.at += 1
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_expr(self) -> Node:
        parts = [self.not_expr()]
        while (tok := self.peek()) is not None and (tok.kind in ("term", "(") or tok.value == "AND"):
            if tok.value == "AND":
                self.at += 1
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_expr(self) -> Node:
        node = self.primary()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.value == "NOT":
            self.at += 1
            node = Not(node, self.primary())
        return node

    def primary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise QueryError(
                f"the query ends with an operator; an operator needs a term after it ({_EXAMPLE})"
            )
        self.at += 1
        if tok.kind == "op":
            hint = " (NOT is binary: write 'apples NOT pears')" if tok.value == "NOT" else ""
            raise QueryError(f"{tok.value} needs a term on each side{hint}; {_EXAMPLE}")
        if tok.kind == ")":
            raise QueryError(
                "the query has an empty '()' or a ')' too many; put terms inside the parentheses"
            )
        if tok.kind == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise QueryError(f"the query nests parentheses deeper than {MAX_DEPTH}; flatten it")
            node = self.or_expr()
            close = self.peek()
            if close is None or close.kind != ")":
                raise QueryError("the query has a '(' without its ')'; close it")
            self.at += 1
            self.depth -= 1
            return node
        return self.term(tok)

    def term(self, tok: _Token) -> Term:
        text = " ".join(tok.value.split())
        if not any(c.isalnum() for c in text):
            shown = text + ("*" if tok.prefix else "")
            raise QueryError(
                f"{shown!r} has no letters or digits to search for; a * must follow a word (prefix*)"
            )
        if len(text) > MAX_TERM_CHARS:
            raise QueryError(
                f"a term of {len(text)} characters is too long; keep each under {MAX_TERM_CHARS}"
            )
        if tok.prefix and sum(c.isalnum() for c in text) < MIN_PREFIX_CHARS:
            raise QueryError(
                f"{text + '*'!r}: a prefix needs at least {MIN_PREFIX_CHARS} letters before the *"
            )
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise QueryError(
                f"the query has more than {MAX_TERMS} terms; search for fewer, more telling words"
            )
        return Term(text, tok.prefix)


def parse_query(text: str) -> Query:
    """Parse a ``memory_search`` query.

    Raises:
        :class:`QueryError`: the query is empty, too long, or not well formed; the message
            says what to send instead.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text)} characters; keep it under {MAX_QUERY_CHARS}")
    tokens = _tokens(text)
    if not tokens:
        raise QueryError(f"the query is empty; send the words to look for ({_EXAMPLE})")
    parser = _Parser(tokens)
    root = parser.parse()
    return Query(root, parser.terms)
