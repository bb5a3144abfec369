"""Skills: folders with a ``SKILL.md`` (YAML front matter and instructions) and the files it uses.

Where they come from, first match wins:

- ``skills/<name>/`` beside talon.yaml (the operator's);
- the packaged skills of ``personas/skills/<name>/``;
- a persona's approved procedures, ``<data_dir>/skills/approved/<persona>/<name>/`` (written
  by ``procedure_write`` as a draft in ``<data_dir>/skills/drafts/<persona>/<name>/`` and moved
  there by ``talon skills approve``; the ``procedures`` table says which are approved).

A persona may use the skills its persona.yaml lists (``skills: [...]``) and its approved
procedures. Front matter: ``name`` (kebab-case, the folder's name), ``description``, optional
``mode`` (``inline``: the instructions are loaded into the turn; ``fork``: run by a child
agent), ``model`` and ``allowed_tools``. A SKILL.md is at most :data:`MAX_SKILL_BYTES`; a
relative link in it must stay inside its folder, and its files are listed only when they do.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from gateway.errors import RefusedError
from gateway.store.procedures import list_procedures

__all__ = [
    "MAX_SKILL_BYTES",
    "NAME",
    "Skill",
    "SkillError",
    "approved_dir",
    "catalog",
    "draft_dir",
    "load_skill",
    "packaged_root",
    "render_skill_md",
    "skill_entries",
    "skills_section",
]

MAX_SKILL_BYTES = 64 * 1024
MAX_DESCRIPTION_CHARS = 1024
MAX_FILES = 100
NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
_KEYS = {"name", "description", "mode", "model", "allowed_tools"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


class SkillError(RefusedError):
    """A skill folder cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    mode: str  # inline | fork
    model: str | None
    allowed_tools: tuple[str, ...] | None
    body: str
    folder: Path
    files: tuple[str, ...]  # the folder's other files, relative to it


def packaged_root() -> Path:
    return Path(str(resources.files("personas") / "skills"))


def draft_dir(data_dir: Path, persona: str, name: str) -> Path:
    return data_dir / "skills" / "drafts" / persona / name


def approved_dir(data_dir: Path, persona: str, name: str) -> Path:
    return data_dir / "skills" / "approved" / persona / name


def _roots(config_dir: Path) -> list[Path]:
    return [config_dir / "skills", packaged_root()]


def catalog(config_dir: Path) -> tuple[dict[str, Skill], list[str]]:
    """Every skill beside talon.yaml and packaged, by name, and the problems of broken folders."""
    found: dict[str, Skill] = {}
    problems: list[str] = []
    for root in _roots(config_dir):
        if not root.is_dir():
            continue
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            if folder.name in found:
                continue
            try:
                found[folder.name] = load_folder(folder)
            except SkillError as exc:
                problems.append(str(exc))
    return found, problems


def load_skill(config_dir: Path, name: str) -> Skill | None:
    """The skill ``name`` beside talon.yaml or packaged; ``None`` when neither has it."""
    if not NAME.match(name):
        return None
    for root in _roots(config_dir):
        if (root / name / "SKILL.md").is_file():
            return load_folder(root / name)
    return None


def _where(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}/SKILL.md"


def load_folder(folder: Path) -> Skill:
    """Read and check ``folder/SKILL.md``.

    Raises:
        :class:`SkillError`: Naming the file and the key that is wrong.
    """
    where = _where(folder)
    path = folder / "SKILL.md"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SKILL_BYTES + 1)
    except OSError as exc:
        raise SkillError(f"{where}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_SKILL_BYTES:
        raise SkillError(f"{where}: larger than {MAX_SKILL_BYTES // 1024} KB; move detail into other files")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{where}: is not UTF-8 text") from None
    meta, body = _split(text, where)
    name = _text(meta, "name", where, required=True)
    if not NAME.match(name) or len(name) > MAX_NAME_CHARS:
        raise SkillError(f"{where}: name: {name!r} must be kebab-case (a-z, 0-9, '-'), at most 64 characters")
    if name != folder.name:
        raise SkillError(f"{where}: name: {name!r} must be the folder's name, {folder.name!r}")
    description = _text(meta, "description", where, required=True)
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"{where}: description: keep it under {MAX_DESCRIPTION_CHARS} characters")
    mode = _text(meta, "mode", where) or "inline"
    if mode not in ("inline", "fork"):
        raise SkillError(f"{where}: mode: {mode!r} must be inline or fork")
    tools = meta.get("allowed_tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
        raise SkillError(f"{where}: allowed_tools: must be a list of tool names such as [read_file, grep]")
    _check_links(body, folder, where)
    return Skill(
        name=name,
        description=" ".join(description.split()),
        mode=mode,
        model=_text(meta, "model", where),
        allowed_tools=tuple(tools) if tools is not None else None,
        body=body.strip(),
        folder=folder,
        files=_files(folder),
    )


def _split(text: str, where: str) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(
            f"{where}: must start with YAML front matter between '---' lines (name, description)"
        )
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillError(f"{where}: the front matter has no closing '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"{where}: the front matter is not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{where}: the front matter must be a mapping of name, description, ...")
    unknown = sorted(str(k) for k in meta if k not in _KEYS)
    if unknown:
        raise SkillError(f"{where}: {unknown[0]}: unknown key; known: {', '.join(sorted(_KEYS))}")
    return meta, "".join(lines[end + 1 :])


def _text(meta: dict[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = meta.get(key)
    if value is None:
        if required:
            raise SkillError(f"{where}: {key}: missing; every skill needs a name and a description")
        return None
    if not isinstance(value, str) or not value.strip():
        raise SkillError(f"{where}: {key}: must be a non-empty string")
    return value.strip()


def _inside(folder: Path, relative: str) -> bool:
    target = (folder / relative).resolve()
    return target == folder.resolve() or target.is_relative_to(folder.resolve())


def _check_links(body: str, folder: Path, where: str) -> None:
    for link in _LINK.findall(body):
        if "://" in link or link.startswith(("#", "mailto:")):
            continue
        path = link.split("#", 1)[0]
        if path and (path.startswith(("/", "~")) or not _inside(folder, path)):
            raise SkillError(f"{where}: the link {link!r} leaves the skill's folder; link files inside it")


def _files(folder: Path) -> tuple[str, ...]:
    """The folder's other regular files (no link that leads out of it), at most MAX_FILES."""
    out: list[str] = []
    base = folder.resolve()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and _inside(base, f"{dirpath}/{d}"))
        for name in sorted(filenames):
            full = Path(dirpath) / name
            relative = full.relative_to(folder).as_posix()
            if relative == "SKILL.md" or name.startswith(".") or not _inside(base, str(full)):
                continue
            if full.is_file():
                out.append(relative)
            if len(out) >= MAX_FILES:
                return tuple(out)
    return tuple(out)


def render_skill_md(name: str, description: str, content: str) -> str:
    """A SKILL.md with generated front matter (procedure_write's drafts)."""
    meta = yaml.safe_dump({"name": name, "description": description}, sort_keys=False, allow_unicode=True)
    return f"---\n{meta}---\n\n{content.strip()}\n"


def skills_section(entries: list[tuple[str, str]]) -> str | None:
    """The system prompt's "Skills" section: names and descriptions only."""
    if not entries:
        return None
    lines = [f"- {name}: {description}" for name, description in entries]
    return (
        "## Skills\nCall the skill tool with a name to load its instructions before doing that kind of "
        "work:\n" + "\n".join(lines)
    )


def skill_entries(
    conn: sqlite3.Connection, persona: str, listed: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """``(name, description)`` of a persona's skills: ``listed`` (persona.yaml's), then its
    approved procedures (database thread)."""
    names = {name for name, _ in listed}
    approved = list_procedures(conn, persona, status="approved")
    return [*listed, *((p.name, p.description) for p in approved if p.name not in names)]
