"""Where the workspaces live on the host: a thread's ``/workspace`` and a persona's ``/shared``.

One place names these folders for everything that touches them: the workspace tools
(:mod:`tools.workspace.roots`, which adds the path resolution the model's arguments go
through), sub-agents, persona MCP servers and intake, which moves inbound files into the
thread's workspace (:mod:`gateway.inbound_files`).

The root is ``workspaces_dir`` (``<data_dir>/workspaces`` unless set; in a cluster, storage
every node shares):

- ``/workspace``: ``<root>/<persona>/threads/<thread_id>/``, one per thread.
- ``/shared``: ``<root>/<persona>/shared/``, or the folder ``workspace.path`` of
  persona.yaml (read-only when ``workspace.read_only`` is true), one per persona.

Nothing else under ``<root>/<persona>`` is handed to anything: a program given
the persona folder itself would see every thread's files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.labels import WORKSPACE_SCOPES, granted_scopes

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona

__all__ = [
    "SHARED",
    "WORKSPACE",
    "opened_roots",
    "shared_workspace",
    "thread_folder",
    "thread_workspace",
]

WORKSPACE = "/workspace"
SHARED = "/shared"


def thread_folder(workspaces_path: Path, persona: str, thread_id: int) -> Path:
    """``<workspaces_path>/<persona>/threads/<thread_id>``."""
    return workspaces_path / persona / "threads" / str(int(thread_id))


def thread_workspace(settings: Settings, persona: str, thread_id: int) -> Path:
    """``<workspaces_dir>/<persona>/threads/<thread_id>``: ``/workspace`` on the host."""
    return thread_folder(settings.workspaces_path, persona, thread_id)


def shared_workspace(settings: Settings, persona: Persona) -> Path:
    """The persona's ``/shared`` on the host: ``workspace.path`` of persona.yaml, else
    ``<workspaces_dir>/<persona>/shared``."""
    if persona.shared_path is not None:
        return persona.shared_path
    return settings.workspaces_path / persona.name / "shared"


def opened_roots(labels: Iterable[str], prefix: str) -> frozenset[str]:
    """The roots (``/workspace``, ``/shared``) the persona's ``prefix`` labels open
    (``fs.read`` or ``fs.write``), by :data:`gateway.labels.WORKSPACE_SCOPES`."""
    names: set[str] = set()
    for scope in granted_scopes(labels, prefix):
        names.update(WORKSPACE_SCOPES.get(scope, ()))
    return frozenset(names)
