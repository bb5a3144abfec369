"""``talon doctor`` in a cluster: every live node must see the same ``workspaces_dir``, for a
thread's turns (and the files moved into its workspace) run on whichever node is free."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway.cluster.node import ClusterNode
from gateway.config import Settings
from gateway.database_doctor import database_findings
from gateway.database_settings import DatabaseSettings
from gateway.store.postgres import open_postgres


def _settings(url: str, root: Path, node_id: str, workspaces: Path) -> Settings:
    database = {"url": url, "cluster": True, "node_id": node_id}
    return Settings(data_dir=root / "data", workspaces_dir=workspaces, database=DatabaseSettings(**database))


async def _join(settings: Settings) -> Any:
    await asyncio.to_thread(settings.data_path.mkdir, parents=True, exist_ok=True)
    db = await open_postgres(settings.database.url or "", settings.data_path, node=True, cluster=True)
    node = ClusterNode(
        db, settings.database, max_attempts=3, on_lost=lambda: None, workspaces_path=settings.workspaces_path
    )
    await node.join()
    return db, node


def _workspace_lines(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(level, text) for level, text in found if "workspaces_dir" in text]


async def test_doctor_names_the_node_that_writes_its_workspaces_elsewhere(
    pg_server: Any, tmp_path: Path
) -> None:
    url = pg_server.new_database()
    shared = tmp_path / "shared-workspaces"
    a = _settings(url, tmp_path / "a", "a", shared)
    b = _settings(url, tmp_path / "b", "b", tmp_path / "b" / "own-workspaces")  # not shared
    db_a, node_a = await _join(a)
    db_b, node_b = await _join(b)
    try:
        [(level, text)] = _workspace_lines(await database_findings(a, []))
        assert level == "fail" and "node(s) b" in text and str(shared) in text, text
        [(level, text)] = _workspace_lines(await database_findings(b, []))
        assert level == "fail" and "node(s) a" in text, text

        await node_b.leave()  # b restarts on the shared folder
        await db_b.close()
        db_b, node_b = await _join(_settings(url, tmp_path / "b", "b", shared))
        [(level, text)] = _workspace_lines(await database_findings(a, []))
        assert level == "ok" and "all 2 live nodes" in text, text
    finally:
        for node, db in ((node_a, db_a), (node_b, db_b)):
            await node.leave()
            await db.close()
    assert list((shared / ".talon-nodes").iterdir()) == []  # a node leaving takes its marker away
