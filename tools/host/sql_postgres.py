"""``db_query`` SQL for PostgreSQL: the checked, scoped SQLite tree rewritten to mean the same.

:mod:`tools.host.sql_guard` checks a query and scopes it on its SQLite syntax tree; on a
PostgreSQL store :func:`to_postgres` then rewrites that tree in place, so that what a model
wrote for SQLite answers the same, and generates PostgreSQL SQL from it:

- SQLite's functions become PostgreSQL's, or the ``__talon_*`` functions the read-only pool
  installs beside the store's tables (``gateway/store/readonly_pg_functions.sql``,
  ``readonly_pg_dates.sql``): the date and time functions, substr() with negative positions,
  GLOB, typeof(), total(), json_extract() and SQLite's JSON paths.
- SQLite's length limit holds where PostgreSQL has none: ``||``, replace() and group_concat()
  check the size of what they build, LIKE and GLOB check their pattern.
- SQLite's loose typing, where PostgreSQL would refuse what a model writes for SQLite: text
  functions take any value, a comparison is 0 or 1 where a value is expected
  (``sum(role = 'user')``), a number is a condition where one is expected (``ON 1``), LIKE
  ignores case, ``CAST(x AS INTEGER)`` truncates, text from a function is a number in
  arithmetic, and grouping by a table's ``id`` allows its other columns (the first two and the
  last in :mod:`tools.host.sql_postgres_passes`).
- Placeholders become psycopg's ``%(name)s`` and every other ``%`` is doubled.

What cannot mean the same on PostgreSQL is refused, saying what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from tools.base import ToolError
from tools.host.sql_postgres_passes import cast, conditions, grouped_columns, put
from tools.host.sql_rules import MAX_PATTERN_BYTES, MAX_VALUE_BYTES

__all__ = ["to_postgres"]

# Control characters never reach the tree from the caller's SQL (the guard refuses them), so
# they can mark where a placeholder goes until psycopg's syntax replaces the mark.
_MARK = "\x01"
_MARKED = re.compile(f"{_MARK}([A-Za-z0-9_]+){_MARK}")
_TIME_FUNCTIONS = frozenset({"date", "time", "datetime", "julianday", "unixepoch"})
_SIMPLE_KEY = re.compile(r'[^.\["]+')
# What the rewritten functions that give text are called: SQLite turns such text into a number
# in arithmetic (strftime('%s', 'now') - created_at), PostgreSQL only when told.
_TEXT_CALLS = frozenset({
    "__talon_strftime", "__talon_date", "__talon_time", "__talon_datetime", "__talon_substr",
    "__talon_replace", "__talon_json_sql", "__talon_value", "__talon_group_concat", "btrim", "ltrim",
    "rtrim", "convert_from",
})  # fmt: skip


def to_postgres(tree: exp.Select, params: Mapping[str, Any]) -> str:
    """PostgreSQL SQL for a query :mod:`tools.host.sql_guard` has checked and scoped.

    Args:
        tree (:class:`sqlglot.exp.Select`): The checked, scoped tree (rewritten in place).
        params (Mapping[:obj:`str`, Any]): The values the query's named parameters will get.

    Returns:
        :obj:`str`: The statement, with psycopg ``%(name)s`` placeholders.

    Raises:
        :class:`tools.base.ToolError`: The query uses what PostgreSQL cannot do as SQLite does.
    """
    conditions(tree)
    grouped_columns(tree)
    _Rewrite(params, tree).run()
    text = tree.sql(dialect="postgres", comments=False).replace("%", "%%")
    return _MARKED.sub(r"%(\1)s", text)


def _unavailable(what: str, instead: str) -> ToolError:
    return ToolError(f"{what} is not available on PostgreSQL, this deployment's database; {instead}")


def _call(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=list(args))


def _number(value: int) -> exp.Expression:
    return exp.Literal.number(value)


# ---------------------------------------------------------------- functions and values


class _Rewrite:
    """One pass over the tree, each node after its children, replacing what differs."""

    def __init__(self, params: Mapping[str, Any], tree: exp.Select) -> None:
        self.params = params
        self.tree = tree
        self.blobs: set[int] = set()  # ids of (rewritten) nodes whose value is bytea
        # json_extract() as a whole result column keeps its JSON type (a number stays a number).
        self.whole_columns = {id(e.unalias()) for e in tree.expressions}

    def run(self) -> None:
        for node in reversed(list(self.tree.walk())):  # children before their parents
            visit = getattr(self, f"_{type(node).__name__}", None)
            if visit is not None:
                visit(node)

    # -------------------------------------------------------------- coercions

    def _param_value(self, node: exp.Expression) -> tuple[bool, Any]:
        if isinstance(node, exp.Var) and node.name.startswith(_MARK):
            return True, self.params.get(node.name.strip(_MARK))
        return False, None

    def typed(self, node: exp.Expression) -> exp.Expression:
        """``node``, cast to text if its type is left to PostgreSQL (a string literal, NULL, a
        text or NULL parameter), for a function that takes any type and so cannot tell it."""
        is_param, value = self._param_value(node)
        untyped = (is_param and (value is None or isinstance(value, str))) or (
            isinstance(node, exp.Null) or (isinstance(node, exp.Literal) and node.is_string)
        )
        return cast(node, "TEXT") if untyped else node

    def text(self, node: exp.Expression) -> exp.Expression:
        """``node`` as text: SQLite's text functions take any value."""
        if isinstance(node, exp.Literal) and node.is_string:
            return node
        if id(node) in self.blobs:
            return _call("convert_from", node, exp.Literal.string("UTF8"))
        if isinstance(node, exp.Cast) and node.meta.get("talon") and node.to.is_type("text"):
            return node
        return cast(node, "TEXT")

    def text_or_blob(self, node: exp.Expression) -> exp.Expression:
        return node if id(node) in self.blobs else self.text(node)

    def blob(self, node: exp.Expression) -> exp.Expression:
        self.blobs.add(id(node))
        return node

    def path(self, node: exp.Expression | None) -> exp.Expression:
        """A JSON path as SQLite writes it ('$.a."b c"[0]'), for ``__talon_json_find``."""
        if node is None:
            return exp.Literal.string("$")
        if not isinstance(node, exp.JSONPath):
            return self.text(node)
        text = ""
        for part in node.expressions:
            if isinstance(part, exp.JSONPathRoot):
                text += "$"
            elif isinstance(part, exp.JSONPathKey):
                key = str(part.this)
                text += f".{key}" if _SIMPLE_KEY.fullmatch(key) else f'."{key}"'
            elif isinstance(part, exp.JSONPathSubscript):
                text += f"[{part.this}]"
            else:
                raise _unavailable(f"the JSON path {node.sql(dialect='sqlite')}", "use $.key and $[n] steps")
        return exp.Literal.string(text)

    # -------------------------------------------------------------- literals and parameters

    def _Placeholder(self, node: exp.Placeholder) -> None:
        node.replace(exp.Var(this=f"{_MARK}{node.name}{_MARK}"))

    def _HexString(self, node: exp.HexString) -> None:
        new = _call("decode", exp.Literal.string(str(node.this)), exp.Literal.string("hex"))
        node.replace(self.blob(new))

    def _Is(self, node: exp.Is) -> None:
        node.set("this", self.typed(node.this))

    def _Cast(self, node: exp.Cast) -> None:
        if node.meta.get("talon"):
            return
        kind = node.to.sql(dialect="sqlite").upper()
        value = node.this
        # SQLite's type affinity of the name decides what the cast does.
        if "INT" in kind:  # truncates toward zero, where PostgreSQL would round
            node.replace(cast(_call("trunc", cast(value, "NUMERIC")), "BIGINT"))
        elif any(word in kind for word in ("CHAR", "CLOB", "TEXT")):
            node.replace(self.text(value))
        elif "BLOB" in kind or not kind:
            node.replace(self.blob(value if id(value) in self.blobs else _call(
                "convert_to", self.text(value), exp.Literal.string("UTF8"))))  # fmt: skip
        elif any(word in kind for word in ("REAL", "FLOA", "DOUB")):
            node.replace(cast(value, "DOUBLE PRECISION"))
        else:
            node.replace(cast(value, "NUMERIC"))

    def _Collate(self, node: exp.Collate) -> None:
        name = node.expression.name.upper()
        if name != "BINARY":
            raise _unavailable(f"COLLATE {name}", "compare lower(a) = lower(b) to ignore case")
        node.set("expression", exp.to_identifier("C", quoted=True))

    def _Limit(self, node: exp.Limit) -> None:
        # SQLite: a negative LIMIT means none, a negative OFFSET means 0; PostgreSQL refuses both.
        limit = node.expression
        if isinstance(limit, exp.Neg) and isinstance(limit.this, exp.Literal):
            node.set("expression", exp.Null())
        elif not isinstance(limit, exp.Literal):
            node.set("expression", exp.Nullif(this=exp.Greatest(this=limit, expressions=[_number(-1)]),
                                              expression=_number(-1)))  # fmt: skip
        if node.args.get("offset") is not None:
            node.set("offset", _offset(node.args["offset"]))

    def _Offset(self, node: exp.Offset) -> None:
        node.set("expression", _offset(node.expression))

    def _Add(self, node: exp.Binary) -> None:
        for arg in ("this", "expression"):
            operand = node.args.get(arg)
            if operand is not None and self.gives_text(operand):
                node.set(arg, cast(operand, "NUMERIC"))

    _Sub = _Mul = _Div = _Mod = _Add

    def gives_text(self, node: exp.Expression) -> bool:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Lower | exp.Upper):
            return True
        return (
            isinstance(node, exp.Anonymous)
            and node.name.lower() in _TEXT_CALLS
            and id(node) not in self.blobs
        )

    # -------------------------------------------------------------- text

    def _Length(self, node: exp.Length) -> None:
        node.set("this", self.text_or_blob(node.this))

    def _Lower(self, node: exp.Lower) -> None:
        node.set("this", self.text(node.this))

    _Upper = _Lower

    def _Substring(self, node: exp.Substring) -> None:
        value = self.text_or_blob(node.this)
        args = [value, self.bigint(node.args["start"])]
        if node.args.get("length") is not None:
            args.append(self.bigint(node.args["length"]))
        new = _call("__talon_substr", *args)
        node.replace(self.blob(new) if id(value) in self.blobs else new)

    def bigint(self, node: exp.Expression) -> exp.Expression:
        return node if isinstance(node, exp.Literal) and node.is_int else cast(node, "BIGINT")

    def integer(self, node: exp.Expression | None) -> exp.Expression | None:
        if node is None or (isinstance(node, exp.Literal) and node.is_int):
            return node
        return cast(node, "INT")

    def _Trim(self, node: exp.Trim) -> None:
        name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(str(node.args.get("position")).upper(), "btrim")
        args = [self.text(node.this)]
        if node.args.get("expression") is not None:
            args.append(self.text(node.args["expression"]))
        node.replace(_call(name, *args))

    def _Replace(self, node: exp.Replace) -> None:
        parts = (node.this, node.args["expression"], node.args["replacement"])
        node.replace(_call("__talon_replace", *(self.text(p) for p in parts), _number(MAX_VALUE_BYTES)))

    def _StrPosition(self, node: exp.StrPosition) -> None:
        if id(node.this) in self.blobs and id(node.args["substr"]) in self.blobs:
            return  # POSITION(b IN a) of two blobs
        node.set("this", self.text(node.this))
        node.set("substr", self.text(node.args["substr"]))

    def _Unicode(self, node: exp.Unicode) -> None:
        node.replace(exp.Nullif(this=_call("ascii", self.text(node.this)), expression=_number(0)))

    def _DPipe(self, node: exp.DPipe) -> None:
        node.set("this", self.text(node.this))
        node.set("expression", self.text(node.expression))
        put(node, lambda n: _call("__talon_value", n, _number(MAX_VALUE_BYTES)))

    def _GroupConcat(self, node: exp.GroupConcat) -> None:
        value = node.this
        if isinstance(value, exp.Order):
            raise _unavailable("ORDER BY inside group_concat()", "order the rows with the query's ORDER BY")
        if isinstance(value, exp.Distinct):
            value = exp.Distinct(expressions=[self.text(e) for e in value.expressions])
        else:
            value = self.text(value)
        separator = node.args.get("separator")
        separator = self.text(separator) if separator is not None else exp.Literal.string(",")
        node.replace(_call("__talon_group_concat", value, separator, _number(MAX_VALUE_BYTES)))

    def _Like(self, node: exp.Like) -> None:
        pattern = _call("__talon_pattern", self.text(node.expression), _number(MAX_PATTERN_BYTES))
        like = exp.ILike(this=self.text(node.this), expression=pattern)  # SQLite's LIKE ignores case
        if isinstance(node.parent, exp.Escape):
            node.replace(like)
        else:  # PostgreSQL's LIKE escapes with \ unless told otherwise; SQLite's escapes nothing
            node.replace(exp.Escape(this=like, expression=exp.Literal.string("")))

    def _Glob(self, node: exp.Glob) -> None:
        args = (self.text(node.this), self.text(node.expression), _number(MAX_PATTERN_BYTES))
        node.replace(_call("__talon_glob", *args))

    # -------------------------------------------------------------- numbers and types

    def _Round(self, node: exp.Round) -> None:
        args = [cast(node.this, "NUMERIC")]
        if node.args.get("decimals") is not None:
            args.append(cast(node.args["decimals"], "INT"))
        node.replace(cast(_call("round", *args), "DOUBLE PRECISION"))  # SQLite's round() is a real

    def _Typeof(self, node: exp.Typeof) -> None:
        node.replace(_call("__talon_typeof", self.typed(node.this)))

    def _Lag(self, node: exp.Lag) -> None:
        node.set("offset", self.integer(node.args.get("offset")))

    _Lead = _Lag

    def _Ntile(self, node: exp.Ntile) -> None:
        node.set("this", self.integer(node.this))

    # -------------------------------------------------------------- dates and times

    def _Date(self, node: exp.Date) -> None:
        node.replace(self.time_call("date", [node.this, *node.expressions]))

    def _TsOrDsToTimestamp(self, node: exp.TsOrDsToTimestamp) -> None:
        if not isinstance(node.parent, exp.TimeToStr):
            node.replace(self.time_call("datetime", [node.this]))

    def _TimeToStr(self, node: exp.TimeToStr) -> None:
        value = node.this.this if isinstance(node.this, exp.TsOrDsToTimestamp) else node.this
        node.replace(self.time_call("strftime", [node.args["format"], value]))

    def time_call(self, name: str, args: list[exp.Expression]) -> exp.Expression:
        """SQLite's date and time functions: (format,) value, modifiers."""
        lead = [self.text(args.pop(0))] if name == "strftime" and args else []
        value = self.text(args.pop(0)) if args else exp.Literal.string("now")
        modifiers = exp.Array(expressions=[self.text(m) for m in args])
        call = _call(f"__talon_{name}", *lead, value, cast(modifiers, "TEXT[]"))
        if name == "strftime":  # a long format can make a long text
            return _call("__talon_value", call, _number(MAX_VALUE_BYTES))
        return call

    # -------------------------------------------------------------- JSON

    def _JSONExtractScalar(self, node: exp.JSONExtractScalar) -> None:
        if node.expressions:
            raise _unavailable("json_extract() with several paths", "call it once for each path")
        found = _call("__talon_json_find", self.text(node.this), self.path(node.expression))
        node.replace(found if id(node) in self.whole_columns else _call("__talon_json_sql", found))

    def _JSONExtract(self, node: exp.JSONExtract) -> None:
        if node.expressions:
            raise _unavailable("json_extract() with several paths", "call it once for each path")
        found = _call("__talon_json_find", self.text(node.this), self.path(node.expression))
        node.replace(cast(found, "TEXT"))  # -> gives JSON text

    def _JSONType(self, node: exp.JSONType) -> None:
        path = self.path(node.args.get("expression"))
        node.replace(_call("__talon_json_type", self.text(node.this), path))

    # -------------------------------------------------------------- the rest by name

    def _Anonymous(self, node: exp.Anonymous) -> None:
        name = node.name.lower()
        args = list(node.expressions)
        if name in _TIME_FUNCTIONS or name == "strftime":
            node.replace(self.time_call(name, args))
        elif name == "total":
            node.replace(_call("__talon_total", cast(args[0], "DOUBLE PRECISION")))
        elif name == "json_valid":
            node.replace(_call("__talon_json_valid", self.text(args[0])))
        elif name == "json_array_length":
            path = self.path(args[1] if len(args) > 1 else None)
            node.replace(_call("__talon_json_array_length", self.text(args[0]), path))
        elif name == "__talon_short":  # the guard's size check of a search argument
            node.set("expressions", [self.typed(args[0]), *args[1:]])
            if id(args[0]) in self.blobs:
                self.blobs.add(id(node))
        elif not name.startswith("__talon_") and name not in ("convert_from", "convert_to", "decode"):
            raise _unavailable(f"the function {name}()", "see the tool's description for what works")


def _offset(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return _number(0)
    if isinstance(node, exp.Literal):
        return node
    return exp.Greatest(this=node, expressions=[_number(0)])
