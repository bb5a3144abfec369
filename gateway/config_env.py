"""``${VAR}`` in talon.yaml and persona files: the values come from the environment and from
``.env`` beside the config (the environment wins), and each substitution is recorded by key
path, so an error can say which variable a wrong or missing value came from."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

__all__ = ["env_origins", "join_key", "load_env", "substitute_env"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute_env(
    raw: Any, env: dict[str, str], missing: dict[str, str], used: dict[str, str] | None = None
) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}``; record by key path the variables that are
    unset (``missing``) and those whose value was put in (``used``)."""
    return _substitute(raw, env, missing, "", {} if used is None else used)


def load_env(config_dir: Path) -> dict[str, str]:
    """The environment for substitution: ``.env`` beside the config, overridden by os.environ."""
    dotenv = {k: v for k, v in dotenv_values(config_dir / ".env").items() if v is not None}
    return {**dotenv, **os.environ}


def env_origins(used: dict[str, str], config_dir: Path) -> dict[str, str]:
    """For each key path in ``used`` (key path -> variable), where its variable's value came
    from: the environment, which wins, or ``.env`` beside the config."""
    dotenv_file = config_dir / ".env"
    return {
        path: f"the environment variable {var}" if var in os.environ else f"{var} in {dotenv_file}"
        for path, var in used.items()
    }


def _substitute(
    node: Any, env: dict[str, str], missing: dict[str, str], path: str, used: dict[str, str]
) -> Any:
    if isinstance(node, dict):
        return {k: _substitute(v, env, missing, join_key(path, str(k)), used) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, env, missing, f"{path}[{i}]", used) for i, v in enumerate(node)]
    if isinstance(node, str) and "${" in node:

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if env.get(name):
                used[path] = name
                return env[name]
            if default is not None:
                return default
            missing[path] = name
            return ""

        return _VAR.sub(repl, node)
    return node


def join_key(path: str, key: str) -> str:
    """``key`` under the key path ``path`` (``channels[0]`` + ``token``)."""
    return f"{path}.{key}" if path else key
