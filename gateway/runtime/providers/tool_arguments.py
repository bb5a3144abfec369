"""Tool-call arguments streamed as JSON text -> the dict a tool receives."""

from __future__ import annotations

import re
from typing import Any

from gateway import jsonsafe
from gateway.runtime.providers.stream_text import clean_text, clean_value

# A model's arguments (a whole file for write_file) may be long; depth stays capped.
MAX_ARGUMENT_CHARS = 32 << 20
INVALID_JSON_KEY = "__invalid_json__"
"""Key under which unparseable arguments are passed on, so the tool layer can tell the model."""

# The escapes through which JSON text that is itself valid decodes to a lone surrogate or NUL.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Parse the JSON object a model produced as a tool call's arguments.

    Empty text means "no arguments". Anything that is not a JSON object comes back as
    ``{"__invalid_json__": raw}`` rather than raising: the turn goes on and the tool layer
    answers with an error the model can correct. Strings in the result are valid text: a
    lone ``\\ud83d`` escape decodes to a surrogate no encoder accepts and ``\\u0000`` to NUL;
    both become U+FFFD, as in streamed text (see
    :func:`~gateway.runtime.providers.stream_text.clean_text`).

    Args:
        raw (:obj:`str`): The argument fragments, joined by a
            :class:`~gateway.runtime.providers.stream_text.TextJoiner`.
    """
    raw = clean_text(raw)
    if not raw.strip():
        return {}
    try:
        value = jsonsafe.loads(raw, max_bytes=MAX_ARGUMENT_CHARS)
    except ValueError:  # jsonsafe.JSONInputError: not JSON, too deep or too long
        return {INVALID_JSON_KEY: raw}
    if not isinstance(value, dict):
        return {INVALID_JSON_KEY: raw}
    return clean_value(value) if _SUSPECT_ESCAPE.search(raw) else value
