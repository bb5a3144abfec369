"""`talon personas NAME` shows what each sender role holds and the fallback models."""

from __future__ import annotations

from pathlib import Path

from gateway.cli.personas import describe
from gateway.config import Settings
from gateway.personas import Persona


def _card(tmp_path: Path, **kw: object) -> list[list[str]]:
    persona = Persona(
        name="p",
        provider="fake",
        model="big",
        description=None,
        capabilities=("shell.exec:sandbox", "fs.read:persona", "git.read"),
        system_prompt="",
        path=tmp_path,
        **kw,  # type: ignore[arg-type]
    )
    return [line.split() for line in describe(Settings(), persona)]


def test_each_role_shows_the_labels_it_holds(tmp_path: Path) -> None:
    lines = _card(
        tmp_path,
        role_capabilities={"guest": (), "member": ("fs.read:thread", "git.read")},
        fallbacks=("fake:small", "other:tiny"),
    )
    assert ["guest", "none:", "no", "host", "tools"] in lines
    assert ["member", "fs.read:thread,", "git.read"] in lines
    assert ["admin", "all", "capabilities"] in lines
    assert ["owner", "all", "capabilities"] in lines
    assert ["fallbacks:", "fake:small,", "other:tiny"] in lines


def test_without_role_capabilities_every_role_holds_everything(tmp_path: Path) -> None:
    lines = _card(tmp_path)
    assert ["roles:", "every", "role", "holds", "all", "capabilities", "(no", "role_capabilities)"] in lines
    assert ["fallbacks:", "none"] in lines
