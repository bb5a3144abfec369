"""Validation and scoping of ``db_query`` SQL, done on the sqlglot syntax tree.

:func:`prepare_query` accepts one plain ``SELECT`` over the four readable tables and returns
SQL regenerated from the checked tree, in which every table reference has been replaced by a
derived table that holds only the caller's rows::

    SELECT m.text FROM messages AS m
    -> SELECT m.text FROM (SELECT * FROM messages WHERE thread_id = :__talon_thread) AS m

The user's ``?`` placeholders become named parameters ``:__p1``, ``:__p2``... (numbered in the
order they appear in the text), so the scope values are named parameters the caller can never
bind or override. Only the regenerated SQL is ever executed, never the text the caller sent.

SQLite runs ``instr``, ``replace`` and two-argument ``trim`` in time proportional to the length
of the text times the length of what is searched for, inside one VM instruction that no
deadline can stop. Their search argument is therefore wrapped in :data:`SIZE_CHECK_FUNCTION`
(registered on the store's read-only connections, :mod:`gateway.store.readonly`), which refuses
one longer than the limits below.

On a PostgreSQL store the same checked and scoped tree is rewritten for PostgreSQL by
:mod:`tools.host.sql_postgres` (``engine="postgresql"``), with psycopg's ``%(name)s``
parameters; the checks are the same, whichever database runs the query.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.dialects.sqlite import SQLite
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from tools.base import ToolError
from tools.host.sql_postgres import to_postgres
from tools.host.sql_rules import (
    ALLOWED_FUNCTIONS,
    ALLOWED_TABLES,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_NEEDLE_BYTES,
    MAX_PATTERN_BYTES,
    MAX_VALUE_BYTES,
    PERSONA_PARAM,
    SCOPES,
    SIZE_CHECK_FUNCTION,
    THREAD_PARAM,
    search_argument_refusal,
)

__all__ = [
    "ALLOWED_FUNCTIONS",
    "ALLOWED_TABLES",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_NEEDLE_BYTES",
    "MAX_PATTERN_BYTES",
    "MAX_SQL_CHARS",
    "MAX_VALUE_BYTES",
    "PERSONA_PARAM",
    "SIZE_CHECK_FUNCTION",
    "THREAD_PARAM",
    "Engine",
    "PreparedQuery",
    "prepare_query",
    "search_argument_refusal",
]

DIALECT = "sqlite"
Engine = Literal["sqlite", "postgresql"]
MAX_SQL_CHARS = 20_000
MAX_PARAMS = 100
_USER_PARAM = "__p{}"
_SQLITE_INT = (-(2**63), 2**63 - 1)

# sqlglot parses known functions into typed nodes; these are the ones that generate an
# allowed SQLite function (or plain syntax such as CAST and CASE).
_TYPED_FUNCTIONS: tuple[type[exp.Expression], ...] = (
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Least, exp.Greatest, exp.GroupConcat,
    exp.Length, exp.Lower, exp.Upper, exp.Substring, exp.Trim, exp.Replace, exp.StrPosition,
    exp.Unicode, exp.Coalesce, exp.Nullif, exp.If, exp.Case, exp.Abs, exp.Round, exp.Sign,
    exp.Date, exp.TimeToStr, exp.TsOrDsToTimestamp, exp.Typeof, exp.Cast,
    exp.JSONExtract, exp.JSONExtractScalar, exp.JSONType,
    exp.RowNumber, exp.Rank, exp.DenseRank, exp.PercentRank, exp.CumeDist, exp.Ntile,
    exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue,
)  # fmt: skip

# Every other kind of node the checked tree may contain: clauses, operators, literals.
_SYNTAX: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered,
    exp.Limit, exp.Offset, exp.Distinct, exp.Window, exp.WindowSpec, exp.Filter,
    exp.Column, exp.Identifier, exp.Star, exp.Table, exp.TableAlias, exp.Alias,
    exp.Literal, exp.Null, exp.Boolean, exp.HexString, exp.Placeholder, exp.Paren, exp.Tuple,
    exp.Neg, exp.Not, exp.And, exp.Or, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ, exp.Like, exp.Glob, exp.Escape, exp.Between, exp.In,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.DPipe,
    exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseNot, exp.BitwiseLeftShift, exp.BitwiseRightShift,
    exp.DataType, exp.DataTypeParam, exp.Collate, exp.Var,
    exp.JSONPath, exp.JSONPathKey, exp.JSONPathRoot, exp.JSONPathSubscript,
)  # fmt: skip

_ALLOWED_HINT = (
    "db_query accepts one plain SELECT over memory_items, schedules, messages and threads "
    "(joins, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT and simple functions such as count, sum, "
    "avg, min, max, length, lower, substr, coalesce, datetime, strftime, json_extract)"
)
_UNQUOTED_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TOKENIZER = SQLite().tokenizer_class()


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    """SQL ready for the read-only connection.

    Attributes:
        sql (:obj:`str`): The regenerated, scoped statement (named parameters only).
        params (Mapping[:obj:`str`, Any]): Values for every parameter in :attr:`sql`.
        limit (:obj:`int`): Rows to return at most.
    """

    sql: str
    params: Mapping[str, Any]
    limit: int


def _refuse(why: str, *, hint: bool = True) -> ToolError:
    return ToolError(f"{why}. {_ALLOWED_HINT}." if hint else why)


def prepare_query(
    sql: Any, params: Any, limit: Any, *, thread_id: int, persona: str, engine: Engine = "sqlite"
) -> PreparedQuery:
    """Check a caller's query and confine it to the caller's thread and persona.

    Args:
        sql (:obj:`str`): One SELECT statement; ``?`` marks a parameter.
        params (Sequence | :obj:`None`): Values for the ``?`` placeholders, in order.
        limit (:obj:`int` | :obj:`None`): Rows wanted (default 100, at most 1000).
        thread_id (:obj:`int`): The calling run's thread.
        persona (:obj:`str`): The calling persona's name.
        engine (``"sqlite"`` | ``"postgresql"``): The store's database, which the SQL is
            generated for: SQLite's with ``:name`` parameters, or PostgreSQL's with psycopg's
            ``%(name)s`` (:func:`tools.host.sql_postgres.to_postgres`).

    Returns:
        :class:`PreparedQuery`

    Raises:
        :class:`tools.base.ToolError`: Saying what was refused and what is allowed.
    """
    rows = _check_limit(limit)
    values = _check_params(params, engine)
    text = _check_text(sql)
    text = _number_placeholders(text, len(values))
    tree = _parse_one(text)
    _check_tree(tree)
    _bound_search_arguments(tree)
    _scope_tables(tree)
    if not tree.args.get("limit"):
        # One row more than wanted tells the caller whether the result was cut.
        tree.set("limit", exp.Limit(expression=exp.Literal.number(rows + 1)))
    for node in tree.walk():
        node.comments = None
    bindings: dict[str, Any] = {_USER_PARAM.format(i + 1): v for i, v in enumerate(values)}
    bindings[THREAD_PARAM] = thread_id
    bindings[PERSONA_PARAM] = persona
    text = (
        to_postgres(tree, bindings) if engine == "postgresql" else tree.sql(dialect=DIALECT, comments=False)
    )
    return PreparedQuery(text, bindings, rows)


# ---------------------------------------------------------------- arguments


def _check_limit(limit: Any) -> int:
    if limit is None:
        return DEFAULT_LIMIT
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        shown = f"{limit!r}" if not isinstance(limit, int) or abs(limit) < 10**18 else "a larger number"
        raise ToolError(
            f"limit must be a whole number from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}); got {shown}"
        )
    return limit


def _check_params(params: Any, engine: Engine) -> list[Any]:
    if params is None:
        return []
    if not isinstance(params, Sequence) or isinstance(params, str | bytes):
        raise ToolError("params must be an array of values for the ? placeholders, in order")
    if len(params) > MAX_PARAMS:
        raise ToolError(f"params has {len(params)} values; at most {MAX_PARAMS} are allowed")
    for i, value in enumerate(params):
        _check_param(f"params[{i}]", value, engine)
    return list(params)


def _check_param(name: str, value: Any, engine: Engine) -> None:
    """Refuse, naming the parameter, any value the database cannot bind as it is."""
    shown = "PostgreSQL" if engine == "postgresql" else "SQLite"
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{name} is {value!r}; use a finite number")
    if isinstance(value, int) and not _SQLITE_INT[0] <= value <= _SQLITE_INT[1]:
        raise ToolError(
            f"{name} is an integer outside the range {shown} stores ({_SQLITE_INT[0]} to {_SQLITE_INT[1]}); "
            "pass a smaller number, or pass it as a string or a decimal number"
        )
    if isinstance(value, str):
        size = _utf8_size(value, name)
        if size > MAX_VALUE_BYTES:
            raise ToolError(
                f"{name} is {size:,} bytes of text; at most {MAX_VALUE_BYTES:,} bytes are allowed"
            )
        if engine == "postgresql" and "\x00" in value:
            raise ToolError(f"{name} contains a NUL character, which PostgreSQL text cannot hold")
    elif value is not None and not isinstance(value, int | float):
        raise ToolError(f"{name} must be a string, number, boolean or null, not {type(value).__name__}")


def _utf8_size(text: str, name: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{name} contains {text[exc.start]!a}, a lone UTF-16 surrogate that is not valid text; "
            "send well-formed Unicode"
        ) from None


def _check_text(sql: Any) -> str:
    if not isinstance(sql, str) or not sql.strip():
        raise ToolError("sql is required: one SELECT statement, e.g. SELECT count(*) FROM messages")
    if len(sql) > MAX_SQL_CHARS:
        raise ToolError(f"sql is {len(sql)} characters; keep it under {MAX_SQL_CHARS}")
    if _CONTROL.search(sql):
        raise ToolError("sql contains control characters; send plain SQL text")
    _utf8_size(sql, "sql")
    return sql


# ---------------------------------------------------------------- tokens and parsing


def _number_placeholders(sql: str, supplied: int) -> str:
    """Replace each ``?`` with ``:__pN`` in textual order; refuse every other parameter form."""
    try:
        tokens = _TOKENIZER.tokenize(sql)
    except SqlglotError as exc:
        raise _refuse(f"could not read the SQL: {_first_line(exc)}") from None
    marks: list[int] = []
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        adjacent = following is not None and following.start == token.end + 1
        if token.token_type == TokenType.PLACEHOLDER:
            if adjacent and following.token_type in (TokenType.NUMBER, TokenType.VAR):
                raise _refuse(
                    f"numbered parameter ?{following.text} is not allowed; write ? and pass values in params, in order",
                    hint=False,
                )
            marks.append(token.start)
        elif token.token_type in (TokenType.COLON, TokenType.PARAMETER) or (
            token.token_type == TokenType.VAR and token.text[:1] in "$:@#"
        ):
            name = token.text
            if token.token_type != TokenType.VAR and adjacent and following is not None:
                name += following.text
            raise _refuse(
                f"named parameters such as {name} are not allowed; write ? and pass values in params, in order",
                hint=False,
            )
    if len(marks) != supplied:
        raise ToolError(
            f"the SQL has {len(marks)} ? placeholder(s) but params has {supplied} value(s); pass one value per ?"
        )
    for n, start in reversed(list(enumerate(marks, 1))):
        sql = f"{sql[:start]}:{_USER_PARAM.format(n)}{sql[start + 1 :]}"
    return sql


def _parse_one(sql: str) -> exp.Select:
    try:
        statements = sqlglot.parse(sql, read=DIALECT)
    except SqlglotError as exc:
        raise _refuse(f"could not parse the SQL: {_first_line(exc)}") from None
    except RecursionError:
        raise _refuse("the SQL is nested too deeply") from None
    real = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    if len(real) != 1:
        raise _refuse(f"send exactly one statement, not {len(real)}")
    tree = real[0]
    if isinstance(tree, exp.SetOperation):
        raise _refuse("UNION, EXCEPT and INTERSECT are not allowed; run separate queries")
    if tree.args.get("with_") or tree.args.get("with"):
        raise _refuse("WITH (common table expressions) is not allowed")
    if not isinstance(tree, exp.Select):
        kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
        raise _refuse(f"only SELECT is allowed, not {kind}")
    return tree


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# ---------------------------------------------------------------- the tree


def _check_tree(tree: exp.Select) -> None:
    for node in tree.walk():
        if node is not tree:
            _check_nested(node)
        if isinstance(node, exp.Table):
            _check_table(node)
        elif isinstance(node, exp.In):
            if node.args.get("query"):
                _check_nested(node.args["query"])
            if node.args.get("field") or node.args.get("unnest"):
                # SQLite reads "x IN messages" as a scan of the whole table.
                raise _refuse(
                    "IN must list values, e.g. role IN ('user', 'assistant'); IN a table is not allowed"
                )
        elif isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name not in ALLOWED_FUNCTIONS:
                raise _refuse(f"the function {name}() is not allowed")
        elif isinstance(node, exp.Identifier):
            _check_identifier(node)
        elif isinstance(node, exp.Column) and (node.args.get("db") or node.args.get("catalog")):
            raise _refuse(f"{node.sql(dialect=DIALECT)}: qualify columns with a table name or alias only")
        elif isinstance(node, exp.Placeholder) and not re.fullmatch(r"__p\d+", str(node.this or "")):
            raise _refuse("parameters must be written as ?", hint=False)
        elif not isinstance(node, _SYNTAX + _TYPED_FUNCTIONS):
            if isinstance(node, exp.Func):
                raise _refuse(f"the function {_func_name(node)}() is not allowed")
            raise _refuse(f"{node.key.upper()} is not supported here")


def _check_nested(node: exp.Expression) -> None:
    if isinstance(node, exp.With | exp.CTE):
        raise _refuse("WITH (common table expressions) is not allowed")
    if isinstance(node, exp.SetOperation):
        raise _refuse("UNION, EXCEPT and INTERSECT are not allowed; run separate queries")
    if isinstance(node, exp.Query | exp.Subquery | exp.Exists | exp.Lateral | exp.Unnest):
        raise _refuse("subqueries are not allowed (in any clause); use joins, or run a second query")


def _check_table(table: exp.Table) -> None:
    if not isinstance(table.this, exp.Identifier):
        name = table.this.name if isinstance(table.this, exp.Anonymous) else table.this.sql(dialect=DIALECT)
        raise _refuse(f"table-valued functions such as {name}() are not allowed")
    if table.args.get("db") or table.args.get("catalog"):
        raise _refuse(f"{table.sql(dialect=DIALECT)}: write the bare table name, without a schema")
    name = table.name
    if name.lower().startswith("sqlite_"):
        raise _refuse(f"{name} is internal to SQLite and cannot be read")
    if not name.isascii() or name.lower() not in ALLOWED_TABLES:
        raise _refuse(f"the table {name!r} cannot be read; only {', '.join(sorted(ALLOWED_TABLES))}")
    alias = table.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        raise _refuse("column lists in table aliases are not supported")


def _check_identifier(node: exp.Identifier) -> None:
    name = node.name
    if not node.quoted and not _UNQUOTED_NAME.match(name):
        raise _refuse(
            f"{name!r} is not a plain name; use letters, digits and _ (or double quotes), and ? for parameters"
        )


def _func_name(node: exp.Func) -> str:
    return node.sql(dialect=DIALECT).split("(")[0].strip().lower() or node.key


def _bound_search_arguments(tree: exp.Select) -> None:
    """Put a size limit on what instr(), replace() and trim() search for (see the module doc)."""
    for node in list(tree.walk()):
        if isinstance(node, exp.StrPosition):
            _bound(node, "substr", MAX_NEEDLE_BYTES, "instr")
        elif isinstance(node, exp.Replace):
            _bound(node, "expression", MAX_NEEDLE_BYTES, "replace")
        elif isinstance(node, exp.Trim):
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(
                str(node.args.get("position")).upper(), "trim"
            )
            _bound(node, "expression", MAX_PATTERN_BYTES, name)


def _bound(node: exp.Expression, arg: str, limit: int, function: str) -> None:
    value = node.args.get(arg)
    if value is None:
        return
    if isinstance(value, exp.Literal) and value.is_string:
        size = _utf8_size(value.this, "sql")
        if size > limit:
            raise ToolError(search_argument_refusal(function, size, limit))
        return
    # The node itself moves into the call (no copy), so nested calls found later in this walk
    # are still part of the tree when they are wrapped in turn.
    call = exp.Anonymous(
        this=SIZE_CHECK_FUNCTION, expressions=[value, exp.Literal.number(limit), exp.Literal.string(function)]
    )
    node.set(arg, call)


def _scope_tables(tree: exp.Select) -> None:
    """Replace each table with ``(SELECT * FROM t WHERE <scope>) AS <alias>``."""
    for table in list(tree.find_all(exp.Table)):
        name = table.name.lower()
        column, param = SCOPES[name]
        alias = table.args.get("alias")
        alias_id = alias.this.copy() if alias is not None and alias.this else table.this.copy()
        inner = (
            exp.select(exp.Star())
            .from_(exp.to_table(name))
            .where(exp.EQ(this=exp.column(column), expression=exp.Placeholder(this=param)))
        )
        table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=alias_id)))
