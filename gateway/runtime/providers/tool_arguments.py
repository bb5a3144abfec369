"""Tool-call arguments streamed as JSON text -> the dict a tool receives."""

from __future__ import annotations

import json
from typing import Any

INVALID_JSON_KEY = "__invalid_json__"
"""Key under which unparseable arguments are passed on, so the tool layer can tell the model."""


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Parse the JSON object a model produced as a tool call's arguments.

    Empty text means "no arguments". Anything that is not a JSON object comes back as
    ``{"__invalid_json__": raw}`` rather than raising: the turn goes on and the tool layer
    answers with an error the model can correct.

    Args:
        raw (:obj:`str`): The concatenated argument fragments.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {INVALID_JSON_KEY: raw}
    if not isinstance(value, dict):
        return {INVALID_JSON_KEY: raw}
    return value
