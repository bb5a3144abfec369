"""Sub-agent definitions: Markdown files with YAML front matter, loaded once at start.

A definition file looks like::

    ---
    name: memory-retriever
    description: Retrieve the memory items relevant to a query.
    model: anthropic:claude-haiku-4-5        # or a fallback list of "<provider>:<model>"
    max_tokens: 1024
    timeout: 60
    required_capabilities: [memory.access:thread]
    output_schema: {type: object, ...}       # optional JSON Schema for the reply
    ---
    The prompt (the rest of the file).

The built-ins ship in the ``personas`` package (``personas/subagents/*.md``); files in the
config dir's ``subagents/`` add sub-agents or replace a built-in of the same name.
A broken built-in is a bug and raises :exc:`RuntimeError`; broken user files raise one
:class:`~gateway.config.ConfigError` listing every problem, each naming file and key.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gateway.config import ConfigError
from gateway.labels import label_problem

__all__ = [
    "MAX_TIMEOUT",
    "USER_DIR",
    "SubagentDefinition",
    "builtin_definitions",
    "load_definitions",
    "model_problem",
    "parse_definition",
]

USER_DIR = "subagents"
MAX_TIMEOUT = 600.0
_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FENCE = "---"


@dataclass(frozen=True, slots=True)
class SubagentDefinition:
    """One sub-agent.

    Attributes:
        name (:obj:`str`): What ``subagent_invoke`` and ``persona.yaml``'s ``subagents:`` call it.
        description (:obj:`str`): One line on what it does.
        models (tuple[:obj:`str`, ...]): ``<provider>:<model>`` strings, tried in order when a
            provider fails.
        max_tokens (:obj:`int`): Output tokens per model call.
        timeout (:obj:`float`): Seconds for the whole invocation, fallbacks and repair included.
        required_capabilities (tuple[:obj:`str`, ...]): Labels the invoking persona must hold.
        output_schema (dict | :obj:`None`): JSON Schema the reply must match; ``None`` for free text.
        required_env (tuple[:obj:`str`, ...]): Environment variables that must be set.
        prompt (:obj:`str`): The system prompt (the file's body).
        source (:obj:`str`): Where it was defined, for messages.
        builtin (:obj:`bool`): Shipped with Talon rather than from the config dir.
    """

    name: str
    description: str
    models: tuple[str, ...]
    max_tokens: int
    timeout: float
    required_capabilities: tuple[str, ...]
    output_schema: dict[str, Any] | None
    required_env: tuple[str, ...]
    prompt: str
    source: str
    builtin: bool = False


def model_problem(value: Any) -> str | None:
    """What is wrong with a ``<provider>:<model>`` string, or ``None``."""
    if not isinstance(value, str):
        return f"{value!r} must be a string '<provider>:<model>'"
    provider, _, model = value.partition(":")
    if not provider.strip() or not model.strip():
        return f"{value!r} must be '<provider>:<model>', e.g. 'anthropic:claude-haiku-4-5'"
    return None


class _FrontMatter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=_NAME, description="what subagent_invoke and a persona's subagents: call it")
    description: str = Field(min_length=1, description="one line on what it does")
    model: str | list[str] = Field(
        description="`<provider>:<model>`, or a list tried in order; subagents.models in talon.yaml overrides it"
    )
    max_tokens: int = Field(4096, ge=16, le=200_000, description="output tokens per model call")
    timeout: float = Field(
        120.0, gt=0, le=MAX_TIMEOUT, description="seconds for the whole invocation, fallbacks included"
    )
    required_capabilities: list[str] = Field([], description="labels the invoking persona must hold")
    output_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema the reply must match (YAML or a JSON string); null = free text"
    )
    required_env: list[str] = Field(
        [], description="environment variables it needs; unset makes it unavailable"
    )

    @field_validator("model")
    @classmethod
    def _models(cls, value: str | list[str]) -> str | list[str]:
        models = [value] if isinstance(value, str) else value
        if not models:
            raise ValueError("give at least one '<provider>:<model>'")
        for item in models:
            problem = model_problem(item)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("required_capabilities")
    @classmethod
    def _labels(cls, value: list[str]) -> list[str]:
        for label in value:
            problem = label_problem(label)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        if isinstance(value, str):  # JSON written as a string
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON Schema object such as {type: object, properties: {...}}")
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise ValueError(
                f"not a valid JSON Schema{' at ' + where if where else ''}: {exc.message}"
            ) from None
        return value

    @field_validator("required_env")
    @classmethod
    def _env(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value


def parse_definition(
    text: str, source: str, *, builtin: bool = False
) -> tuple[SubagentDefinition | None, list[str]]:
    """Parse one definition file.

    Args:
        text (:obj:`str`): The file's content.
        source (:obj:`str`): How messages name the file.
        builtin (:obj:`bool`, optional): Whether it ships with Talon.

    Returns:
        tuple: The definition (``None`` when invalid) and the problems found, each
        starting with ``source``.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        return None, [f"{source}: must start with a '---' line opening the YAML front matter"]
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == _FENCE), None)
    if end is None:
        return None, [f"{source}: the front matter is not closed; add a '---' line after it"]
    try:
        raw = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        return None, [f"{source}: the front matter is not valid YAML: {exc}"]
    if not isinstance(raw, dict):
        return None, [f"{source}: the front matter must be a mapping of keys such as name, model"]
    problems: list[str] = []
    prompt = "\n".join(lines[end + 1 :]).strip()
    if not prompt:
        problems.append(f"{source}: the prompt is empty; write it below the front matter")
    try:
        spec = _FrontMatter.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"][:1]) or "(front matter)"
            if err["type"] == "extra_forbidden":
                fix = "unknown key; remove it or check its spelling"
            elif err["type"] == "missing":
                fix = "required; add it"
            else:
                fix = err["msg"].removeprefix("Value error, ")
            problems.append(f"{source}: {key}: {fix}")
        return None, problems
    if problems:
        return None, problems
    models = (spec.model,) if isinstance(spec.model, str) else tuple(spec.model)
    return (
        SubagentDefinition(
            name=spec.name,
            description=spec.description.strip(),
            models=models,
            max_tokens=spec.max_tokens,
            timeout=spec.timeout,
            required_capabilities=tuple(spec.required_capabilities),
            output_schema=spec.output_schema,
            required_env=tuple(spec.required_env),
            prompt=prompt,
            source=source,
            builtin=builtin,
        ),
        [],
    )


def _load_dir(
    files: Iterable[Traversable], label: str, *, builtin: bool
) -> tuple[dict[str, SubagentDefinition], list[str]]:
    found: dict[str, SubagentDefinition] = {}
    problems: list[str] = []
    for file in sorted(files, key=lambda f: f.name):
        source = f"{label}/{file.name}"
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{source}: cannot read it: {exc}")
            continue
        definition, found_problems = parse_definition(text, source, builtin=builtin)
        problems += found_problems
        if definition is None:
            continue
        if definition.name in found:
            problems.append(
                f"{source}: name: {definition.name!r} is already defined by {found[definition.name].source}; "
                "names must be unique"
            )
            continue
        found[definition.name] = definition
    return found, problems


def builtin_definitions() -> dict[str, SubagentDefinition]:
    """The sub-agents shipped in ``personas/subagents/``.

    Raises:
        :exc:`RuntimeError`: A built-in file is broken (a bug in this release).
    """
    try:
        folder = resources.files("personas") / "subagents"
    except ModuleNotFoundError:
        raise RuntimeError(
            "the built-in sub-agents are missing: the 'personas' package is not installed"
        ) from None
    files = [f for f in folder.iterdir() if f.is_file() and f.name.endswith(".md")]
    found, problems = _load_dir(files, "personas/subagents", builtin=True)
    if problems:
        raise RuntimeError("broken built-in sub-agent definitions:\n" + "\n".join(problems))
    return found


def load_definitions(config_dir: Path | None) -> dict[str, SubagentDefinition]:
    """The built-ins plus ``<config_dir>/subagents/*.md`` (a user file wins on a shared name).

    A user file that replaces a built-in and sets no ``output_schema`` keeps the built-in's,
    because the built-in's data handling relies on that shape.

    Args:
        config_dir (:class:`pathlib.Path` | :obj:`None`): The directory of talon.yaml;
            ``None`` loads the built-ins only.

    Raises:
        :class:`~gateway.config.ConfigError`: Listing every problem in the user's files.
    """
    definitions = builtin_definitions()
    if config_dir is None:
        return definitions
    folder = config_dir / USER_DIR
    if not folder.is_dir():
        return definitions
    files = [f for f in folder.iterdir() if f.is_file() and f.suffix == ".md"]
    user, problems = _load_dir(files, str(folder), builtin=False)
    if problems:
        raise ConfigError(problems)
    for name, definition in user.items():
        builtin = definitions.get(name)
        if builtin is not None and definition.output_schema is None:
            definition = dataclasses.replace(definition, output_schema=builtin.output_schema)
        definitions[name] = definition
    return definitions
