"""``talon doctor``'s database section, for a store on PostgreSQL (``database.url``)."""

from __future__ import annotations

import asyncio
import sqlite3

from gateway.config import Settings
from gateway.personas import Persona

__all__ = ["database_findings"]

_NODES_SCHEMA = 27  # the migration that made the nodes table


async def _shared_workspaces(settings: Settings) -> list[tuple[str, str]]:
    """Whether this node's ``workspaces_dir`` holds every live node's marker (a thread's turns
    run on any node, so its files must be in one folder every node sees)."""
    from gateway.cluster.markers import unseen_nodes
    from gateway.store.postgres import cluster_nodes

    url = settings.database.url or ""
    try:
        nodes = await asyncio.to_thread(cluster_nodes, url, settings.database.failover_seconds)
    except sqlite3.Error as exc:
        return [("warn", f"could not list the cluster's nodes ({exc})")]
    alive = [node for node in nodes if node.alive]
    if not alive:
        return []
    where = settings.workspaces_path
    unseen = await asyncio.to_thread(unseen_nodes, where, alive)
    if not unseen:
        return [("ok", f"workspaces_dir {where}: the same folder on all {len(alive)} live nodes")]
    return [
        (
            "fail",
            f"workspaces_dir {where} does not hold the marker of node(s) {', '.join(unseen)}: those nodes "
            "write threads' files somewhere else. Point workspaces_dir at one shared folder every node "
            "mounts at the same path (docs/scaling.md)",
        )
    ]


async def database_findings(settings: Settings, personas: list[Persona]) -> list[tuple[str, str]]:
    """``(level, text)`` lines: nothing when the store is the SQLite file."""
    url = settings.database.url
    if not url:
        return []
    from gateway.store.db import code_schema_version
    from gateway.store.engines import shown_location
    from gateway.store.postgres import server_state

    shown = shown_location(url, settings.data_path)
    try:
        state = await asyncio.to_thread(server_state, url)
    except sqlite3.Error as exc:
        return [("fail", f"database.url {shown}: cannot connect ({exc})")]
    found = [("ok", f"database.url {shown}: PostgreSQL {state.server_version.split()[0]}")]
    latest = code_schema_version()
    if state.schema_version == 0:
        found.append(
            ("ok", "no Talon tables yet: `talon run` creates them (or `talon migrate --to` fills them)")
        )
    elif state.schema_version < latest:
        found.append(("ok", f"schema version {state.schema_version}: `talon run` migrates it to {latest}"))
    elif state.schema_version > latest:
        found.append(
            ("fail", f"schema version {state.schema_version} is newer than this Talon ({latest}); upgrade")
        )
    else:
        found.append(("ok", f"schema version {latest}, this Talon's"))
    if state.node_running:
        if settings.database.cluster:
            role = "`talon run` here joins its cluster (refused if it runs alone, with cluster: false)"
        elif settings.database.standby:
            role = "this node waits as its standby"
        else:
            role = "`talon run` here would be refused"
        found.append(("ok", f"a Talon daemon is running on this database; {role}"))
    if settings.database.cluster and state.schema_version >= _NODES_SCHEMA:
        found.extend(await _shared_workspaces(settings))
    queriers = [p.name for p in personas if any(c.startswith("db.query") for c in p.capabilities)]
    if queriers and state.schema_version:
        found.append(await _query_role_finding(url, queriers))
    return found


async def _query_role_finding(url: str, queriers: list[str]) -> tuple[str, str]:
    """Whether db_query (held by ``queriers``) can run as its role on this database."""
    import psycopg

    from gateway.store.readonly import QUERY_TABLES
    from gateway.store.readonly_pg import inspect_query_role

    who = ", ".join(queriers)
    try:
        report = await inspect_query_role(url)
    except psycopg.Error as exc:
        return (
            "warn",
            f"db_query ({who}): its role could not be checked ({exc.diag.message_primary or exc})",
        )
    if report.ready:
        tables = ", ".join(sorted(QUERY_TABLES))
        return ("ok", f"db_query ({who}) runs as the role {report.role}, which may read only {tables}")
    if report.can_fix:
        return ("ok", f"db_query ({who}) sets up its role {report.role} at its first query")
    return ("warn", f"db_query ({who}) cannot run on this database yet: {report.advice()}")
