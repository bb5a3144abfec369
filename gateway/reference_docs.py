"""The generated parts of ``docs/``, rendered from the code they describe.

- ``docs/configuration.md``: every talon.yaml key (path, type, default, description) from the
  pydantic models of :mod:`gateway.config`;
- the tables of ``docs/personas.md``: the keys of ``persona.yaml``, of its ``mcp_servers``
  entries and of sub-agent front matter, from their models, and the built-in sub-agents;
- the label table of ``docs/capabilities.md``: each capability label and the tools it lists,
  from :mod:`gateway.labels` and :mod:`tools.registry`.

A description is the field's ``Field(description=...)``; a field without one is an error, so
a new key cannot reach the reference undocumented. Run from the repository root::

    python -m gateway.reference_docs --write    # rewrite the generated parts of docs/
    python -m gateway.reference_docs --check    # exit 1 naming the pages that are stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gateway.model_types import is_model, union_members

__all__ = [
    "COMMAND",
    "PAGES",
    "Row",
    "builtin_subagents",
    "capability_reference",
    "config_reference",
    "main",
    "mcp_server_keys",
    "persona_keys",
    "render_page",
    "rows",
    "stale_pages",
    "subagent_keys",
    "table",
    "write_pages",
]

COMMAND = "python -m gateway.reference_docs --write"
_BEGIN = "<!-- BEGIN generated: {name} ({command}) -->"
_END = "<!-- END generated: {name} -->"
_BLOCK = re.compile(
    r"<!-- BEGIN generated: (?P<name>[a-z-]+) \(.*?\) -->\n.*?<!-- END generated: (?P=name) -->", re.S
)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
_FIRST = {"name": 0, "type": 1}  # shown first: what an entry is called and what kind it is
_BOUNDS = (
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.Lt, "lt", "<"),
)


@dataclass(frozen=True, slots=True)
class Row:
    """One key of a table: its path as written in YAML, type, default and description."""

    path: str
    type: str
    default: str
    description: str


# ---------------------------------------------------------------- walking the models


def _nested_model(tp: Any) -> type[BaseModel] | None:
    """The model a field holds directly (not in a list or mapping), else ``None``."""
    models = [m for m in union_members(tp) if is_model(m)]
    return models[0] if len(models) == 1 and len(union_members(tp)) == 1 else None


def _optional_model(tp: Any) -> type[BaseModel] | None:
    """The model of ``X | None``: a top-level part that is off when absent gets its section."""
    members = union_members(tp)
    if len(members) == 2 and type(None) in members:
        (model,) = (m for m in members if m is not type(None))
        return model if is_model(model) else None
    return None


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo]]:
    """The keys a user writes (``exclude=True`` fields are set by the loader)."""
    for name, field in model.model_fields.items():
        if not field.exclude:
            yield name, field


def _default_of(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def rows(model: type[BaseModel], prefix: str = "", defaults: BaseModel | None = None) -> list[Row]:
    """The keys of ``model``, nested models flattened into dotted paths.

    Args:
        model: The model to describe.
        prefix: Put before every path (``channels[].``).
        defaults: An instance whose values are the defaults shown (a field's default model
            instance, which may differ from that model's own defaults).

    Raises:
        ValueError: A field has no description.
    """
    out: list[Row] = []
    for name, field in sorted(_fields(model), key=lambda item: _FIRST.get(item[0], len(_FIRST))):
        default = getattr(defaults, name) if defaults is not None else _default_of(field)
        out.append(_row(model, name, field, prefix, default))
        nested = _nested_model(field.annotation)
        if nested is not None:
            out += rows(nested, f"{prefix}{name}.", default if isinstance(default, BaseModel) else None)
    return out


def _row(model: type[BaseModel], name: str, field: FieldInfo, prefix: str, default: Any) -> Row:
    if not field.description:
        raise ValueError(f"{model.__name__}.{name} has no Field(description=...)")
    return Row(prefix + name, _type_text(field), _default_text(default), field.description)


def _type_text(field: FieldInfo) -> str:
    bounds = [
        f"{sign} {_number(getattr(item, attr))}"
        for item in field.metadata
        for kind, attr, sign in _BOUNDS
        if isinstance(item, kind)
    ]
    return ", ".join([_describe_type(field.annotation), *bounds])


def _describe_type(tp: Any, plural: bool = False) -> str:
    members = union_members(tp)
    if len(members) > 1:
        named = dict.fromkeys(_describe_type(m, plural) for m in members if m is not type(None))
        return " or ".join(named) + (" or null" if type(None) in members else "")
    tp = members[0]
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " or ".join(f"`{v}`" for v in typing.get_args(tp))
    if origin is list:
        return "list of " + _describe_type(typing.get_args(tp)[0], plural=True)
    if origin is dict:
        value = typing.get_args(tp)[1]
        return "mapping" if value is Any else "mapping of name to " + _describe_type(value)
    if is_model(tp) or tp is Any:
        return "mappings" if plural else "mapping"
    name = _SCALARS.get(tp, getattr(tp, "__name__", str(tp)))
    return f"{name}s" if plural else name


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default_text(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    if isinstance(value, str | Path):
        return f"`{value}`"
    if isinstance(value, BaseModel):
        return "the keys below"
    return f"`{json.dumps(value, default=str)}`"


def table(found: list[Row]) -> str:
    """``found`` as a Markdown table."""

    def cell(text: str) -> str:
        return _markdown(text).replace("|", "\\|")

    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.path}` | {cell(r.type)} | {cell(r.default)} | {cell(r.description)} |" for r in found]
    return "\n".join(lines)


# ---------------------------------------------------------------- docs/configuration.md

_CONFIG_INTRO = """\
# Configuration reference

<!-- Generated from gateway/config.py by `{command}`; edit the models, not this page. -->

Every `talon` command reads one talon.yaml: `-c PATH` after the command name, else
`$TALON_CONFIG`, else `./talon.yaml` (when there is none, the defaults `talon init` writes
apply, from the current directory). Paths in the file are relative to it.
`${{VAR}}` and `${{VAR:-default}}` are replaced from the environment and from `.env` beside the
file (the environment wins). Unknown keys are errors, and every error names its key path and
the fix.
[deploy/talon.example.yaml](../deploy/talon.example.yaml) shows every key with a comment.
"""


def config_reference() -> str:
    """The whole of docs/configuration.md."""
    from gateway.config import Settings

    sections = []
    for name, field in _fields(Settings):
        nested = _nested_model(field.annotation) or _optional_model(field.annotation)
        if nested is not None:
            sections.append(_section(f"`{name}`", field.description, rows(nested, f"{name}.")))
        for where, model, tagged in _collections(name, field.annotation):
            if tagged:
                title, intro = f"`{where}` with `type: {_tag(model)}`", model.model_fields["type"].description
            else:
                title, intro = f"`{where}`", field.description
            sections.append(_section(title, intro, rows(model, f"{where}.")))
    top = _section("Top level", None, _top_rows(Settings))
    return "\n".join([_CONFIG_INTRO.format(command=COMMAND), top, *sections])


def _top_rows(model: type[BaseModel]) -> list[Row]:
    """The keys holding no model directly; lists and mappings of models are one row each."""
    return [
        _row(model, name, field, "", _default_of(field))
        for name, field in _fields(model)
        if _nested_model(field.annotation) is None
    ]


def _collections(name: str, annotation: Any) -> Iterator[tuple[str, type[BaseModel], bool]]:
    """(path, model, is a union member) for each model a list or mapping field holds."""
    for tp in union_members(annotation):
        origin = typing.get_origin(tp)
        if origin not in (list, dict):
            continue
        models = [m for m in union_members(typing.get_args(tp)[-1]) if is_model(m)]
        where = f"{name}[]" if origin is list else f"{name}.<name>"
        for model in models:
            yield where, model, len(models) > 1


def _tag(model: type[BaseModel]) -> str:
    """The ``type`` literal that selects ``model`` in a discriminated union (a channel type)."""
    (value,) = typing.get_args(model.model_fields["type"].annotation)
    return str(value)


def _markdown(text: str) -> str:
    """``text`` with ``<`` escaped outside code spans (Markdown would take ``<provider>``
    for an HTML tag and drop it)."""
    parts = text.split("`")
    parts[::2] = [p.replace("<", "&lt;") for p in parts[::2]]
    return "`".join(parts)


def _sentence(text: str) -> str:
    """A description as a sentence; an identifier at its start keeps its case."""
    text = text.strip().rstrip(".")
    if not re.match(r"[a-z]+_", text):
        text = text[0].upper() + text[1:]
    return _markdown(text) + "."


def _section(title: str, intro: str | None, found: list[Row], level: str = "##") -> str:
    text = f"{level} {title}\n\n"
    if intro:
        text += _sentence(intro) + "\n\n"
    return text + table(found) + "\n"


# ---------------------------------------------------------------- docs/personas.md


def persona_keys() -> str:
    """The table of persona.yaml keys."""
    from gateway.personas import PersonaFile

    return table(rows(PersonaFile))


def mcp_server_keys() -> str:
    """The keys of one ``mcp_servers.<server>`` entry, for each kind of server."""
    from gateway.persona_mcp.settings import HttpServerSettings, StdioServerSettings

    where = "mcp_servers.<server>."
    return "\n".join(
        [
            _section(
                "A stdio server (`command`)",
                StdioServerSettings.__doc__,
                rows(StdioServerSettings, where),
                "###",
            ),
            _section(
                "A streamable HTTP server (`url`)",
                HttpServerSettings.__doc__,
                rows(HttpServerSettings, where),
                "###",
            ),
        ]
    ).rstrip("\n")


def builtin_subagents() -> str:
    """The sub-agents shipped with Talon: name, what it does, its model, what it needs."""
    from gateway.subagents.definitions import builtin_definitions

    lines = ["| sub-agent | what it does | model | needs |", "| --- | --- | --- | --- |"]
    for name, item in sorted(builtin_definitions().items()):
        needs = ", ".join(f"`{c}`" for c in item.required_capabilities) or "nothing"
        models = ", ".join(f"`{m}`" for m in item.models)
        lines.append(f"| `{name}` | {_markdown(item.description)} | {models} | {needs} |")
    return "\n".join(lines)


def subagent_keys() -> str:
    """The front-matter keys of a sub-agent definition file."""
    from gateway.subagents.definitions import _FrontMatter  # the schema of the front matter

    return table(rows(_FrontMatter))


# ---------------------------------------------------------------- docs/capabilities.md


def capability_reference() -> str:
    """Each capability label, what its scope allows, and the tools it lists."""
    from gateway.labels import KNOWN_LABELS, label_problem, tool_prefixes
    from tools.registry import all_tools, packaged_instructions

    tools = all_tools()
    lines = ["| label | scope | tools it lists |", "| --- | --- | --- |"]
    details = []
    for prefix, scope in KNOWN_LABELS.items():
        listed = [t for t in tools if prefix in tool_prefixes(t)]
        named = scope is not None and label_problem(f"{prefix}:*") is None
        if scope is None:
            label, allows = f"`{prefix}`", "none: write the label as is"
        elif named:
            label = f"`{prefix}:<name>`, `{prefix}:*`"
            checks = [f"`{t.mcp_name}` only with `{t.scope_arg}` equal to it" for t in listed if t.scope_arg]
            unscoped = [f"`{t.mcp_name}`" for t in listed if not t.scope_arg]
            allows = "`*` allows any value; a name allows " + "; ".join(checks)
            if unscoped:
                allows += f" ({', '.join(unscoped)} with any scope)"
        elif "|" in scope:
            words = scope.split("|")
            label = ", ".join(f"`{prefix}:{w}`" for w in words)
            allows = "one of " + ", ".join(f"`{w}`" for w in words)
        else:
            label, allows = f"`{prefix}:{scope}`", f"only `{scope}`"
        names = ", ".join(f"[`{t.mcp_name}`](#{t.mcp_name})" for t in listed)
        lines.append(f"| {label} | {allows} | {names} |")
    for tool in tools:
        instructions = packaged_instructions(tool.prefix)
        file = f"`{tool.prefix}.md`" if instructions is not None else "none"
        details.append(
            f"### {tool.mcp_name}\n\nNeeds a `{tool.prefix}` label"
            + (f" (its scope is checked against `{tool.scope_arg}`)" if tool.scope_arg else "")
            + "".join(
                f"; with `{tool.prefix_by_arg[0]}` `{value}`, a `{needs}` label instead"
                for value, needs in (tool.prefix_by_arg[1].items() if tool.prefix_by_arg else ())
            )
            + f". Instruction file: {file}. What the model is told:\n\n> {tool.description}\n"
        )
    return "\n".join(lines) + "\n\n" + "\n".join(details).rstrip("\n")


# ---------------------------------------------------------------- the pages

# page -> generated block name -> renderer; the block "" is the whole page.
PAGES: dict[str, dict[str, Callable[[], str]]] = {
    "configuration.md": {"": config_reference},
    "personas.md": {
        "persona-keys": persona_keys,
        "mcp-server-keys": mcp_server_keys,
        "builtin-subagents": builtin_subagents,
        "subagent-keys": subagent_keys,
    },
    "capabilities.md": {"capabilities": capability_reference},
}


def render_page(page: str, current: str) -> str:
    """``current`` (the page's text) with its generated blocks rendered afresh.

    Raises:
        ValueError: A block's markers are missing from the page.
    """
    blocks = PAGES[page]
    if "" in blocks:
        return blocks[""]()
    found = {m["name"] for m in _BLOCK.finditer(current)}
    missing = sorted(set(blocks) - found)
    if missing:
        markers = ", ".join(_BEGIN.format(name=n, command=COMMAND) for n in missing)
        raise ValueError(f"docs/{page} lacks the generated block(s) {markers}")

    def fresh(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            return match[0]
        begin, end = _BEGIN.format(name=name, command=COMMAND), _END.format(name=name)
        return f"{begin}\n{blocks[name]()}\n{end}"

    return _BLOCK.sub(fresh, current)


def stale_pages(docs: Path) -> list[str]:
    """The pages of ``docs`` whose generated parts differ from the code."""
    out = []
    for page in PAGES:
        path = docs / page
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if render_page(page, current) != current:
            out.append(page)
    return out


def write_pages(docs: Path) -> list[str]:
    """Rewrite the generated parts of ``docs``; return the pages that changed."""
    changed = []
    for page in PAGES:
        path = docs / page
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        fresh = render_page(page, current)
        if fresh != current:
            path.write_text(fresh, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gateway.reference_docs", description=__doc__.split("\n")[0]
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite the generated parts of the docs")
    action.add_argument("--check", action="store_true", help="exit 1 when a page is stale")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="the docs folder (default: ./docs)")
    args = parser.parse_args(argv)
    if args.write:
        for page in write_pages(args.docs):
            print(f"wrote {args.docs / page}")
        return 0
    stale = stale_pages(args.docs)
    for page in stale:
        print(f"{args.docs / page} is out of date; run `{COMMAND}`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
