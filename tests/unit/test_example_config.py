"""deploy/talon.example.yaml shows every key of the config models, each with a comment, and
nothing else; it loads, and every persona it binds exists in a `talon init` folder.

The models are walked from their annotations: nested models, dicts and lists of models, and
each member of the channels' discriminated union. A model that appears several times
(``providers.<name>``, ``bindings[]``, one channel type) counts as covered when its
occurrences together name every key.
"""

from __future__ import annotations

import re
import shutil
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from gateway.config import Settings, load_settings
from gateway.personas import load_personas
from gateway.reference_docs import is_model, union_members
from gateway.scaffold import write_scaffold

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "talon.example.yaml"
_REQUIRED_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _tag(model: type[BaseModel]) -> str:
    """The ``type`` literal that selects ``model`` in a discriminated union (a channel type)."""
    (value,) = typing.get_args(model.model_fields["type"].annotation)
    return str(value)


def _models(annotation: Any) -> list[type[BaseModel]]:
    return [tp for tp in union_members(annotation) if is_model(tp)]


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """The keys a user writes: ``exclude=True`` fields are set by the loader, not the file."""
    return {name: f.annotation for name, f in model.model_fields.items() if not f.exclude}


def _slots(model: type[BaseModel], where: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """Every place a model appears below ``model``, as (slot name, model)."""
    yield where, model
    for key, annotation in _fields(model).items():
        yield from _slots_of(annotation, _join(where, key))


def _slots_of(annotation: Any, where: str) -> Iterator[tuple[str, type[BaseModel]]]:
    models = _models(annotation)
    for model in models:
        yield from _slots(model, f"{where}<{_tag(model)}>" if len(models) > 1 else where)
    for tp in union_members(annotation):
        if typing.get_origin(tp) is list:
            yield from _slots_of(typing.get_args(tp)[0], f"{where}[]")
        elif typing.get_origin(tp) is dict:
            yield from _slots_of(typing.get_args(tp)[1], f"{where}.<name>")


def _observe(
    annotation: Any, value: Any, at: tuple[str, str], seen: dict[str, set[str]], unknown: list[str]
) -> None:
    """Record the keys ``value`` names, per slot; ``at`` is (its path in the example, its slot)."""
    where, slot = at
    models = _models(annotation)
    if isinstance(value, dict) and models:
        model: type[BaseModel] | None = models[0]
        if len(models) > 1:
            model = next((m for m in models if _tag(m) == value.get("type")), None)
            if model is None:
                unknown.append(f"{where}: no model has type {value.get('type')!r}")
                return
            slot = f"{slot}<{_tag(model)}>"
        fields = _fields(model)
        seen.setdefault(slot, set())
        for key, item in value.items():
            if key not in fields:
                unknown.append(f"{where}.{key}" if where else key)
                continue
            seen[slot].add(key)
            _observe(fields[key], item, (_join(where, key), _join(slot, key)), seen, unknown)
        return
    for tp in union_members(annotation):
        if typing.get_origin(tp) is list and isinstance(value, list):
            for i, item in enumerate(value):
                _observe(typing.get_args(tp)[0], item, (f"{where}[{i}]", f"{slot}[]"), seen, unknown)
        elif typing.get_origin(tp) is dict and isinstance(value, dict):
            for name, item in value.items():
                _observe(typing.get_args(tp)[1], item, (f"{where}.{name}", f"{slot}.<name>"), seen, unknown)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


def test_the_walk_reaches_every_channel_type_and_nested_model() -> None:
    slots = dict(_slots(Settings, ""))
    for name in ("channels[]<console>", "channels[]<telegram>", "channels[]<slack>", "channels[]<discord>"):
        assert name in slots
    assert "channels[]<telegram>.rate_limit" in slots
    assert "channels[]<discord>.pacing" in slots
    assert "providers.<name>" in slots
    assert "bindings[]" in slots
    assert "config_dir" not in _fields(Settings)  # set by the loader


def test_the_example_names_every_key_and_no_other() -> None:
    expected = dict(_slots(Settings, ""))
    seen: dict[str, set[str]] = {}
    unknown: list[str] = []
    _observe(Settings, _example(), ("", ""), seen, unknown)
    missing = [
        f"{slot or '(top level)'}: {key}"
        for slot, model in expected.items()
        for key in _fields(model)
        if key not in seen.get(slot, set())
    ]
    assert not unknown, f"deploy/talon.example.yaml names keys the models do not have: {unknown}"
    assert not missing, f"deploy/talon.example.yaml lacks these keys: {missing}"


def test_every_key_of_the_example_has_a_comment() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    bare = []

    def visit(node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                line = lines[key.start_mark.line]
                if "#" not in line[key.start_mark.column :]:
                    bare.append(f"line {key.start_mark.line + 1}: {line.strip()}")
                visit(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                visit(item)

    visit(yaml.compose(EXAMPLE.read_text(encoding="utf-8")))
    assert not bare, "keys without a one-line comment:\n" + "\n".join(bare)


def _placeholder_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in set(_REQUIRED_VAR.findall(EXAMPLE.read_text(encoding="utf-8"))):
        monkeypatch.setenv(var, f"placeholder-{var.lower()}")


def test_the_example_loads_and_binds_only_personas_talon_init_creates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _placeholder_env(monkeypatch)
    monkeypatch.delenv("TALON_MODEL", raising=False)
    # The example is meant as the talon.yaml of a `talon init` folder.
    write_scaffold(tmp_path)
    shutil.copy(EXAMPLE, tmp_path / "talon.yaml")
    settings = load_settings(tmp_path / "talon.yaml")
    assert [c.type for c in settings.channels] == ["console", "telegram", "slack", "discord", "web"]
    personas = load_personas(settings)  # raises naming any binding whose persona is missing
    assert {b.persona for b in settings.bindings} <= set(personas)
