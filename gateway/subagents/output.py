"""Reading a sub-agent's reply: the JSON object in it, checked against ``output_schema``."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from gateway import jsonsafe
from gateway.errors import RefusedError

__all__ = ["OutputChecker", "OutputError", "extract_json", "schema_instructions"]

_FENCED = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(?P<body>.*)\n```\s*$", re.S)
_MAX_MESSAGE = 400


class OutputError(RefusedError, ValueError):
    """The reply is not usable; the message says why (it is sent back to the model)."""


def extract_json(text: str) -> Any:
    """The JSON object in a reply: the whole text, a fenced block, or the outermost braces.

    Raises:
        :class:`OutputError`: No JSON object could be read.
    """
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced["body"].strip()
    try:
        value = jsonsafe.loads(body, max_bytes=len(body))
    except jsonsafe.JSONInputError as first:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise OutputError("the reply contains no JSON object") from None
        try:
            value = jsonsafe.loads(body[start : end + 1], max_bytes=len(body))
        except jsonsafe.JSONInputError:
            raise OutputError(f"the reply is {first}") from None
    if not isinstance(value, dict):
        raise OutputError(f"the reply must be a JSON object, not {type(value).__name__}")
    return value


def _where(error: ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {path.lstrip('.')}" if path else "at the top level"


class OutputChecker:
    """A compiled ``output_schema``.

    Args:
        schema (dict): A valid JSON Schema (definitions are checked when loaded).
    """

    __slots__ = ("_validator",)

    def __init__(self, schema: dict[str, Any]):
        self._validator = Draft202012Validator(schema)

    def problem(self, value: Any) -> str | None:
        """The first few schema violations as one message, or ``None`` when ``value`` fits."""
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        parts = [f"{_where(e)}: {e.message}" for e in errors[:3]]
        message = "; ".join(parts)
        return message if len(message) <= _MAX_MESSAGE else message[:_MAX_MESSAGE] + "…"


def schema_instructions(schema: dict[str, Any]) -> str:
    """The system-prompt section that asks for JSON matching ``schema``."""
    return (
        "## Output\n"
        "Reply with one JSON object and nothing else (no prose, no code fence). "
        "It must match this JSON Schema:\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )
