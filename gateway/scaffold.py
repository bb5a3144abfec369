"""``talon init``: a working config from the packaged templates.

Running it again on the same folder keeps every file and value already there and adds what
is new: channels not yet in talon.yaml, keys not yet in .env. ``force`` overwrites instead.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

import yaml
from dotenv import dotenv_values

__all__ = ["CHANNEL_TYPES", "InitAnswers", "Scaffold", "read_env", "write_scaffold"]

# Packaged names differ where a dotfile would be dropped by packaging.
_RENAMES = {"env.example": ".env.example"}
_CONFIG = Path("talon.yaml")
_DATA_DIR_LINE = re.compile(r"^data_dir: .*$", re.MULTILINE)
_GITIGNORE = (".env", "data/")
_NEEDS_QUOTES = re.compile(r"[\s#\"']")
CHANNEL_TYPES = ("telegram", "slack", "discord")
_CHANNEL_ENTRIES = {
    "telegram": '{name: telegram, type: telegram, token: "${TELEGRAM_BOT_TOKEN}"}',
    "slack": '{name: slack, type: slack, bot_token: "${SLACK_BOT_TOKEN}", app_token: "${SLACK_APP_TOKEN}"}',
    "discord": '{name: discord, type: discord, token: "${DISCORD_BOT_TOKEN}"}',
}


@dataclass
class InitAnswers:
    """What the flags or the questions gave: ``.env`` values and channels to add (by type)."""

    env: dict[str, str] = field(default_factory=dict)
    channels: list[str] = field(default_factory=list)


@dataclass
class Scaffold:
    """What ``write_scaffold`` did, for the user to read."""

    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_env(target: Path) -> dict[str, str]:
    """The values of ``target/.env`` (empty when there is none)."""
    path = target / ".env"
    return {k: v or "" for k, v in dotenv_values(path).items()} if path.is_file() else {}


def write_scaffold(
    target: Path, *, force: bool = False, data_dir: str | None = None, answers: InitAnswers | None = None
) -> Scaffold:
    """Copy the init templates into ``target``, write ``.env`` (mode 600) and ``.gitignore``.

    ``data_dir`` replaces the template's ``data_dir`` (relative paths are relative to
    ``target``, as in any talon.yaml): a container or a system service keeps its state
    outside a read-only config directory. Existing files are kept unless ``force``.
    """
    answers = answers or InitAnswers()
    done = Scaffold()
    root = resources.files("gateway") / "templates" / "init"
    for rel, entry in _walk(root, Path()):
        dest = target / rel
        if dest.exists() and not force:
            done.kept.append(dest)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = entry.read_text(encoding="utf-8")
        if rel == _CONFIG and data_dir is not None:
            text = _with_data_dir(text, data_dir)
        dest.write_text(text, encoding="utf-8")
        done.written.append(dest)
    _write_env(target / ".env", answers.env, force, done)
    _write_gitignore(target / ".gitignore", done)
    for channel in answers.channels:
        _add_channel(target / _CONFIG, channel, done)
    return done


def _write_env(path: Path, values: dict[str, str], force: bool, done: Scaffold) -> None:
    """New keys are added; a key already in the file keeps its value unless ``force``."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        example = path.parent / ".env.example"
        lines = example.read_text(encoding="utf-8").splitlines() if example.exists() else []
    present = {line.split("=", 1)[0].strip(): i for i, line in enumerate(lines) if "=" in line}
    existing = read_env(path.parent)
    changed = not path.exists()
    for key, value in values.items():
        line = f"{key}={json.dumps(value) if _NEEDS_QUOTES.search(value) else value}"
        if key in existing and existing[key] and not force:
            continue
        if key in present:
            lines[present[key]] = line
        else:
            commented = next((i for i, text in enumerate(lines) if text.startswith(f"# {key}=")), None)
            if commented is None:
                lines.append(line)
            else:
                lines[commented] = line
        changed = True
    if not changed:
        done.kept.append(path)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    done.written.append(path)


def _write_gitignore(path: Path, done: Scaffold) -> None:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    missing = [entry for entry in _GITIGNORE if entry not in lines]
    if not missing:
        done.kept.append(path)
        return
    path.write_text("\n".join([*lines, *missing]) + "\n", encoding="utf-8")
    done.written.append(path)


def _add_channel(config: Path, channel: str, done: Scaffold) -> None:
    """Add the channel and its binding to the assistant, unless talon.yaml has it already."""
    text = config.read_text(encoding="utf-8")
    current = yaml.safe_load(text) or {}
    if any(c.get("name") == channel for c in current.get("channels") or []):
        return
    entry, binding = _CHANNEL_ENTRIES[channel], f"{{channel: {channel}, persona: assistant}}"
    updated = _append_item(_append_item(text, "channels", entry), "bindings", binding)
    try:
        parsed = yaml.safe_load(updated) if updated else None
    except yaml.YAMLError:
        parsed = None
    names = [c.get("name") for c in (parsed or {}).get("channels") or []]
    if parsed is None or channel not in names:
        done.notes.append(f"add to {config}: under channels:  - {entry}\n  and under bindings:  - {binding}")
        return
    config.write_text(updated, encoding="utf-8")
    if config not in done.written:
        done.written.append(config)


def _append_item(text: str, key: str, item: str) -> str:
    """``text`` with ``- item`` after the last item of the top-level block list ``key``, or ""
    when the file does not have that shape (then the user is told what to add)."""
    if not text:
        return ""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if re.fullmatch(rf"{key}:\s*", line)), None)
    if start is None:
        return ""
    last = start
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line and not line.startswith((" ", "#")):
            break
        if line.strip() and not line.lstrip().startswith("#"):
            last = i
    indent = "  "
    if last > start:
        indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
        if not lines[last].lstrip().startswith("- "):
            return ""  # a multi-line item: leave the file to the user
    lines.insert(last + 1, f"{indent}- {item}")
    return "\n".join(lines) + "\n"


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
