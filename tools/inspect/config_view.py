"""``config_get`` (label ``runtime.inspect``): the loaded talon.yaml with every secret masked,
or the names of the environment variables it refers to.

Masked: every value that came from a ``${VAR}``, every key whose name says secret (token,
secret, password, api key, credential, private key, cookie, authorization), every value equal
to one of the config's known secrets, and the user:password part of any URL. The env target
gives only names and whether each is set, never a value.
"""

from __future__ import annotations

import os
import re
from typing import Any

from gateway.config_env import load_env
from tools.base import HostTool, ToolContext, ToolError

PREFIX = "runtime.inspect"
MASK = "[masked]"
MAX_KEY_CHARS = 200
MAX_KEY_SEGMENTS = 16
_SECRET_KEY = re.compile(
    r"token|secret|passw|api_?key|apikey|credential|private_?key|cookie|authorization|auth_header", re.I
)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def masked_settings(ctx: ToolContext) -> dict[str, Any]:
    """The settings as a dict, every secret replaced by :data:`MASK`."""
    settings = ctx.settings
    from_env = set(settings.env_refs)
    known = set(settings.secrets())

    def mask(node: Any, path: str, key: str) -> Any:
        if isinstance(node, dict):
            return {k: mask(v, f"{path}.{k}" if path else str(k), str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [mask(v, f"{path}[{i}]", key) for i, v in enumerate(node)]
        if node in (None, "", "none"):
            return node
        if path in from_env or _SECRET_KEY.search(key) or (isinstance(node, str) and node in known):
            return MASK
        if isinstance(node, str):
            return _URL_USERINFO.sub(f"{MASK}@", node)
        return node

    shown = mask(settings.model_dump(mode="json"), "", "")
    assert isinstance(shown, dict)
    return shown


def _segments(key: str) -> list[str | int]:
    if len(key) > MAX_KEY_CHARS:
        raise ToolError(f"key is {len(key)} characters; a dotted path has at most {MAX_KEY_CHARS}")
    parts: list[str | int] = []
    position = 0
    for match in _SEGMENT.finditer(key):
        gap = key[position : match.start()]
        if gap not in ("", "."):
            break
        name, index = match.groups()
        parts.append(int(index) if index is not None else (int(name) if name.isdigit() else name))
        position = match.end()
    if position != len(key) or not parts or len(parts) > MAX_KEY_SEGMENTS:
        raise ToolError(
            f"key must be a dotted path such as agent.max_turns or channels[0].name "
            f"(at most {MAX_KEY_SEGMENTS} segments)"
        )
    return parts


def _lookup(tree: dict[str, Any], key: str) -> Any:
    node: Any = tree
    walked = ""
    for part in _segments(key):
        if isinstance(part, int) and isinstance(node, list):
            if part >= len(node):
                raise ToolError(f"{walked or 'the config'} has {len(node)} entries; {part} is past the end")
            node = node[part]
        elif isinstance(part, str) and isinstance(node, dict) and part in node:
            node = node[part]
        else:
            where = walked or "the top level"
            keys = ", ".join(sorted(node)) if isinstance(node, dict) else "none (it is not a mapping)"
            raise ToolError(f"no key {str(part)[:40]!r} at {where}; keys there: {keys}")
        walked = f"{walked}[{part}]" if isinstance(part, int) else (f"{walked}.{part}" if walked else part)
    return node


def _env(ctx: ToolContext, key: str | None) -> dict[str, Any]:
    env = load_env(ctx.settings.config_dir)
    names = sorted(set(ctx.settings.env_refs.values()))
    if key:
        if key not in names:
            raise ToolError(
                f"talon.yaml refers to no variable {key[:64]!r}; it refers to: {', '.join(names) or 'none'}"
            )
        names = [key]
    return {
        "target": "env",
        "variables": [
            {"name": n, "set": bool(env.get(n)), "from": "environment" if n in os.environ else ".env"}
            if env.get(n)
            else {"name": n, "set": False, "from": None}
            for n in names
        ],
    }


async def config_get(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target, key = args.get("target"), args.get("key") or None
    if target == "env":
        return _env(ctx, key)
    if target != "config":
        raise ToolError(
            "target must be 'config' (talon.yaml as loaded) or 'env' (the variables it refers to)"
        )
    tree = masked_settings(ctx)
    if key is None:
        return {"target": "config", "value": tree}
    return {"target": "config", "key": key, "value": _lookup(tree, key)}


TOOL = HostTool(
    mcp_name="config_get",
    internal_name="runtime.config_get",
    prefix=PREFIX,
    description=(
        "Read Talon's configuration as loaded from talon.yaml (Talon's counterpart of the reference's "
        "config files). target config: the settings, or one value with key as a dotted path "
        "(agent.max_turns, channels[0].name); every secret is masked as [masked]: tokens, API keys, "
        "signing secrets, passwords, anything put in from ${ENV}, and passwords in URLs. target env: "
        "the names of the environment variables talon.yaml refers to and whether each is set, never "
        "their values (key: one name). Changing configuration is for operators: edit the files."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": ["config", "env"], "description": "config or env."},
            "key": {
                "type": "string",
                "maxLength": MAX_KEY_CHARS,
                "description": "Dotted path or variable name.",
            },
        },
        "required": ["target"],
        "additionalProperties": False,
    },
    handler=config_get,
)
