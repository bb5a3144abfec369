"""``talon init``: a working config from the packaged templates."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

# Packaged names differ where a dotfile would be dropped by packaging.
_RENAMES = {"env.example": ".env.example"}


def write_scaffold(target: Path, *, force: bool = False) -> list[Path]:
    """Copy the init templates into ``target``; refuse to overwrite unless ``force``."""
    root = resources.files("gateway") / "templates" / "init"
    files = list(_walk(root, Path()))
    if not force:
        for rel, _ in files:
            if (target / rel).exists():
                raise FileExistsError(str(target / rel))
    written = []
    for rel, entry in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(entry.read_text(encoding="utf-8"), encoding="utf-8")
        written.append(dest)
    return written


def _walk(node: Traversable, rel: Path) -> list[tuple[Path, Traversable]]:
    out: list[tuple[Path, Traversable]] = []
    for entry in node.iterdir():
        if entry.name.startswith("__") or entry.name.endswith(".pyc"):
            continue
        if entry.is_dir():
            out.extend(_walk(entry, rel / entry.name))
        else:
            out.append((rel / _RENAMES.get(entry.name, entry.name), entry))
    return out
