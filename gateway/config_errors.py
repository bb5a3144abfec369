"""The wording of configuration problems, for talon.yaml and persona.yaml alike.

Each problem names where it is (the file and line of a YAML error, the key path of a value)
and what to write instead: pydantic's own phrases are replaced, by error type, with what was
expected and an example; an unknown key gets the closest key of the model at that level; a
value that came from ``.env`` or the environment says so. Imports nothing of the project but
the error type and the model helpers, so :mod:`gateway.config` and :mod:`gateway.personas`
both use it.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticUndefined

from gateway.errors import ConfigError
from gateway.model_types import is_model, union_members

__all__ = [
    "NAME_PATTERN",
    "describe_validation",
    "did_you_mean",
    "field_at",
    "model_at",
    "model_ref_problem",
    "read_yaml",
    "yaml_problem",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"

# What a value of each pydantic error type should have been, in a user's words.
_EXPECTED: dict[str, str] = {
    "float_parsing": "a number",
    "float_type": "a number",
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "text (in quotes when it looks like a number or yes/no)",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of keys to values",
    "model_attributes_type": "a mapping of keys to values",
    "path_type": "a path",
}
_BOUNDS: dict[str, tuple[str, str]] = {
    "greater_than": ("gt", "more than {}"),
    "greater_than_equal": ("ge", "{} or more"),
    "less_than": ("lt", "less than {}"),
    "less_than_equal": ("le", "{} or less"),
}
_PATTERNS = {
    NAME_PATTERN: "1-63 lower-case letters, digits, - and _, starting with a letter or digit (e.g. team-chat)"
}
# An example for a key without a usable default, by the kind of value it takes.
_EXAMPLES: dict[type, str] = {bool: "true", int: "10", float: "2.5", str: '"..."', Path: "some/folder"}


# ---------------------------------------------------------------- YAML


def read_yaml(file: Path, shown: str | None = None) -> Any:
    """The parsed YAML of ``file`` (``None`` for an empty one).

    Raises:
        ConfigError: The file is not valid YAML; the problem names ``shown`` (default: the
            path) with the line and column.
    """
    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(shown or str(file), exc)]) from None


def yaml_problem(shown: str, exc: yaml.YAMLError) -> str:
    """``exc`` as one line that names the file, the line and the column."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f"{shown}: not valid YAML: {problem}"
    text = f"{shown}, line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {problem}"
    context, started = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and started is not None and started is not mark:
        text += f" ({context}, which starts on line {started.line + 1})"
    elif context:
        text += f" ({context})"
    if "'\\t'" in problem:
        text += "; YAML indents with spaces, not tabs"
    return text


# ---------------------------------------------------------------- walking the models


def model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that holds the keys at ``loc`` (pydantic's error location), if one does.

    A list index or a mapping key steps into the item; a discriminated union's tag (a
    channel's ``type``) picks its member.
    """
    tp: Any = root
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return None
    models = [m for m in union_members(tp) if is_model(m)]
    return models[0] if len(models) == 1 else None


def field_at(root: type[BaseModel], loc: Sequence[str | int]) -> FieldInfo | None:
    """The field ``loc`` ends at, or ``None`` (a list item, an unknown key)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    model = model_at(root, loc[:-1])
    return model.model_fields.get(loc[-1]) if model is not None else None


def _step(tp: Any, part: str | int) -> Any:
    members = union_members(tp)
    models = [m for m in members if is_model(m)]
    if len(models) > 1 and isinstance(part, str):
        tagged = [m for m in models if part in _tags(m)]
        if tagged:
            return tagged[0]
    for member in members:
        if is_model(member):
            if isinstance(part, str) and part in member.model_fields:
                return member.model_fields[part].annotation
            continue
        origin = typing.get_origin(member)
        if origin in (list, tuple, set) and isinstance(part, int):
            return typing.get_args(member)[0]
        if origin is dict and isinstance(part, str):
            return typing.get_args(member)[1]
    return None


def _tags(model: type[BaseModel]) -> tuple[Any, ...]:
    field = model.model_fields.get("type")
    return typing.get_args(field.annotation) if field is not None else ()


def _keys(model: type[BaseModel]) -> list[str]:
    return [name for name, f in model.model_fields.items() if not f.exclude]


# ---------------------------------------------------------------- wording


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (a typo, a prefix), if any is close enough."""
    options = [str(c) for c in choices]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    if close:
        return close[0]
    starts = [o for o in options if o.startswith(word) or word.startswith(o)]
    return starts[0] if len(starts) == 1 else None


def describe_validation(
    exc: ValidationError,
    model: type[BaseModel],
    *,
    where: Callable[[tuple[str | int, ...]], str],
    origins: Mapping[str, str] | None = None,
) -> list[str]:
    """One problem per error of ``exc``: ``<key path>: <what is wrong>; <the fix>``.

    Args:
        exc: The error from validating against ``model``.
        model: The model that was validated (it says which keys and values are allowed).
        where: Shows a location as the user wrote it (``channels[1].pacing.burst``).
        origins: By shown key path, where a substituted value came from (``TALON_MODEL in
            .env``), added to the problem with that value.
    """
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        shown = where(loc)
        text = _problem(err, model, loc, (origins or {}).get(shown))
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            shown = f"{shown}.type"
        problems.append(f"{shown}: {text}")
    return problems


def _problem(
    err: ErrorDetails, model: type[BaseModel], loc: tuple[str | int, ...], origin: str | None
) -> str:
    kind = err["type"]
    given = _given(err, origin)
    ctx = err.get("ctx") or {}
    key = next((str(p) for p in reversed(loc) if isinstance(p, str)), "key")
    if kind == "extra_forbidden":
        return _unknown_key(model, loc)
    if kind == "missing":
        field = field_at(model, loc)
        about = f" ({field.description})" if field is not None and field.description else ""
        return f"required{about}; add it, e.g. {key}: {_example(field)}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
        text = f"must be one of {', '.join(tags)}"
        guess = did_you_mean(str(ctx.get("tag", "")), tags) if kind == "union_tag_invalid" else None
        return f"{text}; did you mean {guess}?" if guess else text
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        choices = [c.strip() for c in expected.replace(" or ", ", ").split(",") if c.strip()]
        guess = did_you_mean(str(err.get("input")), choices)
        hint = f"; did you mean {guess}?" if guess else ""
        return f"must be one of {', '.join(choices)}, not {given}{hint}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"must be {words.format(ctx.get(name))}, not {given}; e.g. {key}: {_example(field_at(model, loc))}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return f"{given} must be {_PATTERNS.get(pattern, f'text matching {pattern}')}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, not {given}; e.g. {key}: {_example(field_at(model, loc))}"
    text = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{text} (the value comes from {origin})" if origin else text


def _unknown_key(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    holder = model_at(model, loc[:-1])
    guess = did_you_mean(str(loc[-1]), _keys(holder)) if holder is not None else None
    if guess:
        return f"unknown key; did you mean {guess}?"
    return "unknown key; remove it or check its spelling"


def _given(err: ErrorDetails, origin: str | None) -> str:
    """The value that was refused, short, and where it came from when not from the file."""
    value = err.get("input")
    text = repr(value) if isinstance(value, str) else _yaml_value(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} (from {origin})" if origin else text


def _example(field: FieldInfo | None) -> str:
    """What to write: the key's default when it has a plain one, else a value of its type."""
    if field is not None:
        default = field.default
        if default is not PydanticUndefined and default is not None and not isinstance(default, BaseModel):
            return _yaml_value(default)
        for tp in union_members(field.annotation):
            if tp in _EXAMPLES:
                return _EXAMPLES[tp]
            origin = typing.get_origin(tp)
            if origin is list:
                return "[]"
            if origin is dict or is_model(tp):
                return "{}"
            if origin is typing.Literal:
                return str(typing.get_args(tp)[0])
    return '"..."'


def _yaml_value(value: Any) -> str:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def model_ref_problem(ref: str, providers: Sequence[str], origin: str | None = None) -> str | None:
    """What is wrong with a ``<provider>:<model>`` reference, or ``None`` when it names a
    provider of ``providers``; ``origin`` says where the value came from (``.env``)."""
    provider, _, model = ref.partition(":")
    if provider in providers and model:
        return None
    given = f"{ref!r} (from {origin})" if origin else repr(ref)
    example = f"{providers[0] if providers else 'anthropic'}:{model or '<model name>'}"
    if not provider or not model:
        return f"{given} must be '<provider>:<model>', e.g. {example}"
    if not providers:
        return (
            f"{given} names the provider {provider!r}, but talon.yaml defines no providers; "
            f"add providers.{provider} there (docs/configuration.md)"
        )
    guess = did_you_mean(provider, providers)
    return (
        f"{given} names the provider {provider!r}, which talon.yaml does not define; "
        + (f"did you mean {guess}? " if guess else "")
        + f"use one of {', '.join(providers)} (e.g. {example}) or add providers.{provider} to talon.yaml"
    )
