"""Two passes of :func:`tools.host.sql_postgres.to_postgres` over a whole query, before its
functions are rewritten, for what SQLite allows and PostgreSQL would refuse:

- :func:`conditions`: SQLite's booleans are numbers. A comparison where a value goes is 0 or 1
  (``sum(role = 'user')``); a number where a condition goes is true unless 0 (``ON 1``).
- :func:`grouped_columns`: grouped by a table's ``id`` (its primary key), SQLite lets the query
  name that table's other columns bare, as PostgreSQL does for a table it sees directly, but
  not for the scoped tables the guard puts in their place.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

__all__ = ["cast", "conditions", "grouped_columns", "put"]

# What SQLite reads as a condition; anything else is a value.
_PREDICATES: tuple[type[exp.Expression], ...] = (
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.Like, exp.Glob, exp.Escape, exp.In, exp.Between, exp.Is, exp.And, exp.Or, exp.Not, exp.Boolean,
)  # fmt: skip


def put(node: exp.Expression, build: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """Replace ``node`` with ``build(node)``, which may contain ``node`` itself."""
    holder = exp.Null()
    node.replace(holder)
    new = build(node)
    holder.replace(new)
    return new


def cast(node: exp.Expression, to: str) -> exp.Cast:
    """``CAST(node AS to)``, marked as the rewrite's own: the caller's casts are rewritten
    (SQLite's type affinity), these are left as they are."""
    made = exp.Cast(this=node, to=exp.DataType.build(to, dialect="postgres"))
    made.meta["talon"] = True
    return made


# ---------------------------------------------------------------- conditions and values


def _slot(node: exp.Expression) -> str:
    """What the place of ``node`` expects: ``condition``, ``value`` or ``keep`` (syntax)."""
    child, parent = node, node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    key = child.arg_key
    if isinstance(parent, exp.Where | exp.Having):
        return "condition" if key == "this" else "value"
    if isinstance(parent, exp.Join):
        return "condition" if key == "on" else "keep"
    if isinstance(parent, exp.And | exp.Or | exp.Not):
        return "condition"
    if isinstance(parent, exp.If) and key == "this":
        # CASE x WHEN 1: a value compared with x; CASE WHEN c, iif(c, ...): a condition.
        case = parent.parent
        return "value" if isinstance(case, exp.Case) and case.args.get("this") is not None else "condition"
    if isinstance(parent, exp.Escape) and key == "this":
        return "keep"
    if isinstance(parent, exp.Is) and key == "expression":
        return "keep"
    return "value"


def conditions(tree: exp.Select) -> None:
    """SQLite's booleans are numbers: a comparison where a value goes is 0 or 1, and a number
    where a condition goes is true unless 0."""
    for node in list(tree.walk()):
        if isinstance(node, exp.Paren) or node.parent is None:
            continue
        slot = _slot(node)
        if slot == "value" and isinstance(node, _PREDICATES):
            put(node, lambda n: cast(n, "INT"))
        elif slot == "condition" and not isinstance(node, (*_PREDICATES, exp.Null)):
            if isinstance(node, exp.Literal) and not node.is_string:
                node.replace(exp.Boolean(this=float(node.this) != 0))
            else:
                put(node, lambda n: exp.NEQ(this=exp.Paren(this=n), expression=exp.Literal.number(0)))


# ---------------------------------------------------------------- grouping


def _sources(select: exp.Select) -> dict[str, exp.Expression]:
    """The scoped tables of ``select`` by their alias (lower case)."""
    found: dict[str, exp.Expression] = {}
    starts = [select.args.get("from_") or select.args.get("from")]
    starts += [join for join in select.args.get("joins") or ()]
    for start in starts:
        source = start.this if start is not None else None
        if isinstance(source, exp.Subquery) and source.alias:
            found[source.alias.lower()] = source
    return found


def _aggregated(node: exp.Expression, select: exp.Select) -> bool:
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, exp.Filter):
            return True
        aggregate = isinstance(parent, exp.AggFunc) or (
            isinstance(parent, exp.Anonymous) and parent.name.lower() == "total"
        )
        if aggregate and not (isinstance(parent.parent, exp.Window) and parent.arg_key == "this"):
            return True
        parent = parent.parent
    return False


def grouped_columns(select: exp.Select) -> None:
    """Grouped by a table's ``id`` (its primary key), that table's other columns are single
    values of the group: SQLite allows them bare, PostgreSQL does so only for a table it sees
    directly, not a scoped one; ``min()`` of each gives that one value."""
    group = select.args.get("group")
    sources = _sources(select)
    if group is None or not sources:
        return
    only = next(iter(sources)) if len(sources) == 1 else None
    keyed = set()
    for key in group.expressions:
        if isinstance(key, exp.Column) and key.name.lower() == "id":
            owner = key.table.lower() if key.table else only
            if owner in sources:
                keyed.add(owner)
    if not keyed:
        return
    key_texts = {key.sql(dialect="sqlite").lower() for key in group.expressions}
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    order = select.args.get("order")
    targets = [*select.expressions, select.args.get("having"), order]
    for target in (t for t in targets if t is not None):
        for column in list(target.find_all(exp.Column)):
            owner = column.table.lower() if column.table else only
            if owner not in keyed or column.sql(dialect="sqlite").lower() in key_texts:
                continue
            if target is order and not column.table and column.name.lower() in aliases:
                continue  # ORDER BY a result column's name
            if not _aggregated(column, select):
                put(column, lambda c: exp.Min(this=c))
