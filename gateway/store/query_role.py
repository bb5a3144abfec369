"""The PostgreSQL role that ``db_query`` runs as, and the functions its SQL calls.

PostgreSQL enforces what :mod:`gateway.store.readonly` enforces on SQLite with an authorizer:
a query of :mod:`gateway.store.readonly_pg` runs in a read-only transaction as the role
:func:`role_name` (``SET LOCAL ROLE``), a NOLOGIN role that may read the allowed tables and
none of Talon's others. Roles belong to the whole server, so the name is the database's own:
two Talon databases on one server never share one.

:func:`prepare_role` creates or repairs the role idempotently when the pool first needs it,
which takes ``CREATEROLE`` (the store itself never needs it): without it, the report names the
statements an administrator can run instead, as :func:`inspect_role` (``talon doctor``) does.
It also installs the ``__talon_*`` functions of ``readonly_pg_functions.sql`` and
``readonly_pg_dates.sql`` beside the store's tables, and checks what the role can read:
another table readable by everyone (``PUBLIC``) is reported, not ignored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["FUNCTIONS_VERSION", "RoleReport", "inspect_role", "prepare_role", "role_name"]

Connection = psycopg.AsyncConnection[Any]

_PREFIX = "talon_query_"
# Held (per transaction) while one node sets the role up, so nodes starting together take turns.
_SETUP_LOCK = 0x74616C6F6E02
_FILES = ("readonly_pg_functions.sql", "readonly_pg_dates.sql")
# The function whose comment records the installed version of the functions.
_MARKER = "__talon_short(anyelement, integer, text)"


def _function_sql() -> str:
    package = resources.files("gateway.store")
    return "\n".join(package.joinpath(name).read_text(encoding="utf-8") for name in _FILES)


FUNCTIONS_VERSION = "talon db_query " + hashlib.sha256(_function_sql().encode()).hexdigest()[:16]


def role_name(database: str) -> str:
    """The role for ``database``: ``talon_query_<name>``, or a hash for a name that is long or odd."""
    if re.fullmatch(r"[a-z0-9_]{1,40}", database):
        return _PREFIX + database
    return _PREFIX + hashlib.sha256(database.encode()).hexdigest()[:16]


@dataclass(slots=True)
class RoleReport:
    """What stands between ``db_query`` and its role on one database.

    Attributes:
        role (:obj:`str`): The role's name.
        schema (:obj:`str`): The schema of the store's tables.
        problems (list[:obj:`str`]): What is missing or wrong; empty when the role is ready.
        admin_sql (list[:obj:`str`]): Statements an administrator can run to fix them.
        can_fix (:obj:`bool`): The store's database user can fix them itself (at the first query).
    """

    role: str
    schema: str
    problems: list[str] = field(default_factory=list)
    admin_sql: list[str] = field(default_factory=list)
    can_fix: bool = True

    @property
    def ready(self) -> bool:
        return not self.problems

    def advice(self) -> str:
        """One paragraph: the problems and the statements that fix them."""
        text = "; ".join(self.problems)
        if self.admin_sql:
            text += f". A database administrator can run, in this database: {' '.join(self.admin_sql)}"
        return text


@dataclass(frozen=True, slots=True)
class _State:
    """What the catalog says about the role, read as the store's user."""

    database: str
    user: str
    schema: str
    can_create: bool  # the user may create roles
    exists: bool
    member: bool  # the user may SET ROLE to the role
    usage: bool  # the role may use the schema
    marker: str | None  # the installed functions' version


_STATE = """
SELECT current_database(), current_user, current_schema(),
       (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user),
       r.oid IS NOT NULL,
       r.oid IS NOT NULL AND CASE WHEN current_setting('server_version_num')::int >= 160000
                                  THEN pg_has_role(current_user, r.oid, 'SET')  -- what SET ROLE needs
                                  ELSE pg_has_role(current_user, r.oid, 'MEMBER') END,
       r.oid IS NOT NULL AND has_schema_privilege(r.oid, current_schema(), 'USAGE'),
       obj_description(to_regprocedure(%(marker)s), 'pg_proc')
FROM (SELECT 1) AS one LEFT JOIN pg_roles AS r ON r.rolname = %(role)s
"""
# Tables and views outside the system schemas that the role can read any column of.
_READABLE = """
SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_%%' AND has_any_column_privilege(%(role)s, c.oid, 'SELECT')
"""
_CAN_READ = "SELECT coalesce(has_table_privilege(%(role)s, to_regclass(%(table)s), 'SELECT'), false)"
_GRANTED_DIRECTLY = """
SELECT EXISTS (SELECT 1 FROM pg_class AS c, aclexplode(c.relacl) AS a
               WHERE c.oid = %(table)s::regclass AND a.grantee = to_regrole(%(role)s))
"""
_ATTRIBUTES = """
SELECT rolsuper OR rolcanlogin OR rolbypassrls OR rolcreaterole OR rolcreatedb OR rolreplication,
       ARRAY(SELECT m.roleid::regrole::text FROM pg_auth_members AS m WHERE m.member = r.oid)
FROM pg_roles AS r WHERE r.rolname = %(role)s
"""
_OWN_FUNCTIONS = (
    "SELECT oid::regprocedure::text FROM pg_proc "
    "WHERE pronamespace = current_schema()::regnamespace AND proname LIKE '\\_\\_talon\\_%%'"
)


async def _row(conn: Connection, query: str, params: dict[str, Any] | None = None) -> tuple[Any, ...]:
    row = await (await conn.execute(query, params)).fetchone()
    assert row is not None
    return tuple(row)


async def _state(conn: Connection) -> _State:
    (database,) = await _row(conn, "SELECT current_database()")
    row = await _row(conn, _STATE, {"marker": _MARKER, "role": role_name(str(database))})
    database, user, schema, can_create, exists, member, usage, marker = row
    return _State(str(database), str(user), str(schema), bool(can_create), bool(exists), bool(member),
                  bool(usage), None if marker is None else str(marker))  # fmt: skip


def _ident(*names: str) -> str:
    return ".".join(sql.Identifier(n).as_string() for n in names)


def _bootstrap(state: _State, tables: frozenset[str]) -> list[str]:
    """What an administrator runs for a store user that may not create roles."""
    role = role_name(state.database)
    return [
        f"CREATE ROLE {_ident(role)} NOLOGIN;",
        f"GRANT {_ident(role)} TO {_ident(state.user)};",
        f"GRANT USAGE ON SCHEMA {_ident(state.schema)} TO {_ident(role)};",
        _grant_select(state.schema, tables, role),
    ]


def _grant_select(schema: str, tables: frozenset[str] | list[str], role: str) -> str:
    return f"GRANT SELECT ON {', '.join(_ident(schema, t) for t in sorted(tables))} TO {_ident(role)};"


async def _attempt(conn: Connection, statement: sql.Composable) -> str | None:
    """Run ``statement`` in a savepoint; the database's refusal, or None."""
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        return exc.diag.message_primary or str(exc)
    return None


async def _readable_others(conn: Connection, report: RoleReport, tables: frozenset[str]) -> list[str]:
    rows = await (await conn.execute(_READABLE, {"role": report.role})).fetchall()
    return [_ident(n, t) for n, t in rows if not (n == report.schema and t in tables)]


async def _unreadable(conn: Connection, report: RoleReport, tables: frozenset[str]) -> list[str]:
    found = []
    for table in sorted(tables):
        (readable,) = await _row(
            conn, _CAN_READ, {"role": report.role, "table": _ident(report.schema, table)}
        )
        if not readable:
            found.append(table)
    return found


async def prepare_role(conn: Connection, tables: frozenset[str]) -> RoleReport:
    """Create or repair the role of this database and install the functions (idempotent).

    Runs as the store's database user on ``conn`` (autocommit, not in a transaction); what it
    could do is committed even when something else was refused. A GRANT its user may not make
    is only a warning in PostgreSQL, so each is checked again afterwards.

    Returns:
        :class:`RoleReport`: Ready, or the problems left and the statements that fix them.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
        state = await _state(conn)
        report = RoleReport(role_name(state.database), state.schema)
        role, user = sql.Identifier(report.role), sql.Identifier(state.user)
        if not state.exists:
            refused = await _attempt(conn, sql.SQL("CREATE ROLE {} NOLOGIN NOINHERIT").format(role))
            if refused is not None:
                report.problems.append(f"Talon could not create the role {report.role} ({refused})")
                report.admin_sql = _bootstrap(state, tables)
                report.can_fix = False
                return report
            state = await _state(conn)
        if not state.member:
            refused = await _attempt(conn, sql.SQL("GRANT {} TO {}").format(role, user))
            if refused is not None:
                report.problems.append(f"the database user {state.user} is not a member of {report.role}")
                report.admin_sql.append(f"GRANT {_ident(report.role)} TO {_ident(state.user)};")
        if not state.usage:
            await _attempt(
                conn, sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(state.schema), role)
            )
            if not (await _state(conn)).usage:
                report.problems.append(f"the role {report.role} may not use the schema {state.schema}")
                report.admin_sql.append(
                    f"GRANT USAGE ON SCHEMA {_ident(state.schema)} TO {_ident(report.role)};"
                )
        for table in await _unreadable(conn, report, tables):
            await _attempt(
                conn, sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(state.schema, table), role)
            )
        missing = await _unreadable(conn, report, tables)
        if missing:
            report.problems.append(f"Talon could not let the role {report.role} read {', '.join(missing)}")
            report.admin_sql.append(_grant_select(state.schema, missing, report.role))
        await _revoke_others(conn, report, tables)
        await _check_attributes(conn, report)
        if state.marker != FUNCTIONS_VERSION:
            await _install_functions(conn, report)
        if report.ready:
            refused = await _attempt(conn, sql.SQL("SET LOCAL ROLE {}; RESET ROLE").format(role))
            if refused is not None:
                report.problems.append(
                    f"the database user {state.user} cannot act as {report.role} ({refused})"
                )
                report.admin_sql.append(f"GRANT {_ident(report.role)} TO {_ident(state.user)};")
        return report


async def _revoke_others(conn: Connection, report: RoleReport, tables: frozenset[str]) -> None:
    """Take back whatever else the role may read; report what it still can (granted to PUBLIC)."""
    for name in await _readable_others(conn, report, tables):
        (direct,) = await _row(conn, _GRANTED_DIRECTLY, {"table": name, "role": report.role})
        if direct:
            await _attempt(conn, sql.SQL("REVOKE ALL ON {} FROM {}").format(
                sql.SQL(name), sql.Identifier(report.role)))  # fmt: skip
    left = await _readable_others(conn, report, tables)
    if left:
        names = ", ".join(left)
        report.problems.append(
            f"the role {report.role} can read more than db_query's tables: {names} (granted to PUBLIC?)"
        )
        report.admin_sql.append(f"REVOKE SELECT ON {names} FROM PUBLIC;")
        report.can_fix = False


async def _check_attributes(conn: Connection, report: RoleReport) -> None:
    row = await (await conn.execute(_ATTRIBUTES, {"role": report.role})).fetchone()
    if row is None:
        return
    privileged, memberships = row
    if privileged:
        report.problems.append(f"the role {report.role} has more than NOLOGIN (superuser, login, ...)")
        report.admin_sql.append(
            f"ALTER ROLE {_ident(report.role)} NOSUPERUSER NOLOGIN NOBYPASSRLS NOCREATEROLE NOCREATEDB "
            "NOREPLICATION;"
        )
        report.can_fix = False
    for granted in memberships or ():
        report.problems.append(f"the role {report.role} is a member of {granted}")
        report.admin_sql.append(f"REVOKE {granted} FROM {_ident(report.role)};")
        report.can_fix = False


async def _install_functions(conn: Connection, report: RoleReport) -> None:
    try:
        async with conn.transaction():
            await conn.execute(_function_sql().encode())
            comment = sql.SQL("COMMENT ON FUNCTION {} IS {}").format(sql.SQL(_MARKER), FUNCTIONS_VERSION)
            await conn.execute(comment)
            # PUBLIC may call new functions unless the database says otherwise: the role may.
            for (name,) in await (await conn.execute(_OWN_FUNCTIONS)).fetchall():
                grant = sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
                    sql.SQL(name), sql.Identifier(report.role)
                )
                await conn.execute(grant)
    except psycopg.Error as exc:
        report.problems.append(
            f"Talon could not install db_query's functions ({exc.diag.message_primary or exc})"
        )
        report.can_fix = False


async def inspect_role(conn: Connection, tables: frozenset[str]) -> RoleReport:
    """What :func:`prepare_role` would find, changing nothing (``talon doctor``).

    ``can_fix``: the store's user can set the role up itself, at the first query.
    """
    state = await _state(conn)
    report = RoleReport(role_name(state.database), state.schema)
    if not state.exists:
        report.problems.append(f"the role {report.role} does not exist yet")
        if not state.can_create:
            report.problems[-1] += f" and the database user {state.user} may not create roles"
            report.admin_sql = _bootstrap(state, tables)
            report.can_fix = False
        return report
    if not state.member:
        report.problems.append(f"the database user {state.user} is not a member of {report.role}")
        report.admin_sql.append(f"GRANT {_ident(report.role)} TO {_ident(state.user)};")
        report.can_fix = bool(state.can_create)
    missing = await _unreadable(conn, report, tables)
    if missing:
        report.problems.append(f"the role {report.role} may not read {', '.join(missing)}")
        report.admin_sql.append(_grant_select(state.schema, missing, report.role))
    if state.marker != FUNCTIONS_VERSION:
        report.problems.append("db_query's functions are not installed in this version yet")
    others = await _readable_others(conn, report, tables)
    if others:
        report.problems.append(
            f"the role {report.role} can read more than db_query's tables: {', '.join(others)}"
        )
        report.admin_sql.append(f"REVOKE SELECT ON {', '.join(others)} FROM PUBLIC;")
        report.can_fix = False
    await _check_attributes(conn, report)
    return report
