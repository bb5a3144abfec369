"""The registry collects families: their tools in order, and each prefix's packaged instructions."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from tools import host, registry
from tools.base import HostTool


async def _noop(ctx: Any, args: dict[str, Any]) -> None:
    return None


def _family(root: Path, name: str, prefixes: list[str], files: list[str]) -> Any:
    """A family package ``name`` under ``root`` whose tools carry ``prefixes``."""
    package = root / name
    (package / "instructions").mkdir(parents=True)
    (package / "__init__.py").write_text("TOOLS = []\n")
    for file in files:
        (package / "instructions" / file).write_text(f"## {file}\n")
    module = importlib.import_module(name)
    module.TOOLS = [
        HostTool(f"{name}_{i}", f"{name}.t{i}", p, "", {"type": "object"}, _noop)
        for i, p in enumerate(prefixes)
    ]
    return module


@pytest.fixture
def families(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_host_family_is_the_registry_in_reference_order() -> None:
    assert registry.all_tools()[: len(host.TOOLS)] == list(host.TOOLS)
    assert len(host.TOOLS) == 10


def test_each_prefix_of_the_host_family_ships_its_instructions() -> None:
    for tool in registry.all_tools():
        packaged = registry.packaged_instructions(tool.prefix)
        assert packaged is not None and packaged.read_text(encoding="utf-8").startswith("## "), tool.prefix
    assert registry.packaged_instructions("no.such") is None


def test_instruction_files_come_from_the_family_of_their_prefix(families: Path) -> None:
    first = _family(families, "fam_first", ["net.http"], ["net.http.md", "notes.txt"])
    second = _family(families, "fam_second", ["db.query", "net.http"], ["db.query.md"])
    found = registry._instruction_files([first, second])
    assert sorted(found) == ["db.query", "net.http"]
    assert found["net.http"].read_text(encoding="utf-8") == "## net.http.md\n"


def test_an_instruction_file_for_no_tool_of_its_family_is_refused(families: Path) -> None:
    family = _family(families, "fam_stray", ["net.http"], ["db.query.md"])
    with pytest.raises(RuntimeError, match=r"fam_stray ships db\.query\.md"):
        registry._instruction_files([family])


def test_two_families_cannot_ship_the_same_instruction_file(families: Path) -> None:
    first = _family(families, "fam_one", ["net.http"], ["net.http.md"])
    second = _family(families, "fam_two", ["net.http"], ["net.http.md"])
    with pytest.raises(RuntimeError, match=r"fam_one and fam_two both ship net\.http\.md"):
        registry._instruction_files([first, second])
