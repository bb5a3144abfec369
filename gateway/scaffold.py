"""``talon init``: a working config from the packaged templates."""

from __future__ import annotations

import json
import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

import yaml

# Packaged names differ where a dotfile would be dropped by packaging.
_RENAMES = {"env.example": ".env.example"}
_CONFIG = Path("talon.yaml")
_DATA_DIR_LINE = re.compile(r"^data_dir: .*$", re.MULTILINE)


def write_scaffold(target: Path, *, force: bool = False, data_dir: str | None = None) -> list[Path]:
    """Copy the init templates into ``target``; refuse to overwrite unless ``force``.

    ``data_dir`` replaces the template's ``data_dir`` (relative paths are relative to
    ``target``, as in any talon.yaml): a container or a system service keeps its state
    outside a read-only config directory.
    """
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
        text = entry.read_text(encoding="utf-8")
        if rel == _CONFIG and data_dir is not None:
            text = _with_data_dir(text, data_dir)
        dest.write_text(text, encoding="utf-8")
        written.append(dest)
    return written


def _with_data_dir(text: str, data_dir: str) -> str:
    # Plain when YAML reads the path back unchanged, else a quoted string.
    value = data_dir if yaml.safe_load(data_dir) == data_dir else json.dumps(data_dir)
    text, count = _DATA_DIR_LINE.subn(lambda _: f"data_dir: {value}", text, count=1)
    if count != 1:
        raise RuntimeError("the packaged talon.yaml template has no data_dir line")
    return text


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
