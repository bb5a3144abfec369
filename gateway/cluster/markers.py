"""Whether every node of a cluster sees the same ``workspaces_dir``.

A thread's turns run on whichever node is free, so its workspace (and the inbound files
moved into it) must be the same folder on every node: shared storage mounted at one path.
Each node leaves a marker there when it joins, ``.talon-nodes/<node_id>``, holding its host,
pid and start time as the ``nodes`` table records them; ``talon doctor`` on any node looks
for every live node's marker in its own ``workspaces_dir``. A marker that is missing or
tells another start means that node writes its workspaces somewhere else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from gateway.store.nodes import NodeRow

__all__ = ["MARKERS", "marker_text", "remove_marker", "unseen_nodes", "write_marker"]

MARKERS = ".talon-nodes"


def marker_text(host: str, pid: int, started_at: float) -> str:
    """What a node's marker holds: enough to tell this start of the node from an earlier one."""
    return f"{host} {pid} {started_at!r}\n"


def _marker(workspaces_path: Path, node_id: str) -> Path:
    return workspaces_path / MARKERS / node_id.replace("/", "_")


def write_marker(workspaces_path: Path, node_id: str, text: str) -> None:
    """Leave this node's marker (blocking: run it in a thread)."""
    path = _marker(workspaces_path, node_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def remove_marker(workspaces_path: Path, node_id: str) -> None:
    """Take this node's marker away as it leaves (best effort)."""
    with contextlib.suppress(OSError):
        _marker(workspaces_path, node_id).unlink()


def unseen_nodes(workspaces_path: Path, nodes: Iterable[NodeRow]) -> list[str]:
    """The live nodes whose marker this ``workspaces_path`` does not hold as they recorded it."""
    unseen = []
    for node in nodes:
        if not node.alive:
            continue
        try:
            text = _marker(workspaces_path, node.node_id).read_text(encoding="utf-8")
        except OSError:
            text = ""
        if text != marker_text(node.host, node.pid, node.started_at):
            unseen.append(node.node_id)
    return unseen
