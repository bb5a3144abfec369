"""Checking a host-tool call's arguments against the tool's JSON schema.

The bridge validates before the handler runs, so a handler only ever sees arguments of
the declared shape. Messages name the argument and what to send instead ("channelId is
required", "action must be one of create, update"), never the rejected value: they
reach the model and the audit log, and a value may hold something secret.

Most calls fit: for schemas made of plain keywords (types, string enums, bounds,
``required``, ``additionalProperties``) a compiled check confirms a fit without walking the
schema; anything it cannot confirm goes to ``jsonschema``, which has the last word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

__all__ = ["ArgumentChecker"]

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
_MAX_PROBLEMS = 3

Check = Callable[[Any], bool]

# Keywords that never make an instance invalid.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})
# The Python types JSON decodes to; other values (subclasses included) are left to jsonschema.
_JSON_TYPES = frozenset({str, int, float, bool, type(None), dict, list})
_IS_TYPE: dict[str, Check] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,  # 1.0 is an integer to JSON Schema: jsonschema decides
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "null": lambda v: v is None,
}
_LENGTH_BOUNDS: dict[str, Callable[[int, int], bool]] = {
    "minLength": lambda n, bound: n >= bound,
    "maxLength": lambda n, bound: n <= bound,
}
_NUMBER_BOUNDS: dict[str, Callable[[float, float], bool]] = {
    "minimum": lambda v, bound: v >= bound,
    "maximum": lambda v, bound: v <= bound,
    "exclusiveMinimum": lambda v, bound: v > bound,
    "exclusiveMaximum": lambda v, bound: v < bound,
}
_VALUE_KEYWORDS = _ANNOTATIONS | {"type", "enum"} | _LENGTH_BOUNDS.keys() | _NUMBER_BOUNDS.keys()
_OBJECT_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}


class ArgumentChecker:
    """A compiled validator for one tool's ``input_schema``.

    Args:
        tool_name (:obj:`str`): The tool's MCP name, used in messages.
        schema (Mapping[:obj:`str`, Any]): The tool's JSON schema (an object schema).

    Raises:
        :exc:`jsonschema.exceptions.SchemaError`: The schema itself is invalid.
    """

    __slots__ = ("_fits", "_properties", "_tool", "_validator")

    def __init__(self, tool_name: str, schema: Mapping[str, Any]):
        Draft202012Validator.check_schema(schema)
        self._tool = tool_name
        self._validator = Draft202012Validator(schema)
        self._fits = _compile_object(schema)
        self._properties = sorted((schema.get("properties") or {}).keys())

    def problem(self, args: Any) -> str | None:
        """Describe what is wrong with ``args``.

        Returns:
            :obj:`str` | :obj:`None`: ``None`` when the arguments fit the schema, otherwise
            up to three problems joined by ``"; "``.
        """
        if not isinstance(args, dict):
            return f"{self._tool} takes its arguments as a JSON object"
        if self._fits is not None and self._fits(args):
            return None
        errors = sorted(self._validator.iter_errors(args), key=_error_order)
        if not errors:
            return None
        problems: list[str] = []
        seen: set[str] = set()
        for error in errors:
            where = _path(error)
            if where and where in seen:
                continue  # one problem per argument: "must be a string" makes "one of" moot
            seen.add(where)
            text = self._describe(error)
            if text not in problems:
                problems.append(text)
            if len(problems) == _MAX_PROBLEMS:
                break
        return "; ".join(problems)

    def _describe(self, error: ValidationError) -> str:
        where = _path(error)
        kind, expected = error.validator, error.validator_value
        if kind == "required":
            missing = [
                name for name in expected if isinstance(error.instance, dict) and name not in error.instance
            ]
            name = missing[0] if missing else "an argument"
            return f"{_join(where, name)} is required"
        if kind == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            allowed = sorted(error.schema.get("properties", {})) if where else self._properties
            names = ", ".join(repr(e) for e in extra)
            return f"unknown argument {names}{' in ' + where if where else ''}; allowed: {', '.join(allowed)}"
        subject = where or "the arguments"
        if kind == "enum":
            return f"{subject} must be one of {', '.join(str(v) for v in expected)}"
        if kind == "const":
            return f"{subject} must be {expected!r}"
        if kind == "type":
            kinds = expected if isinstance(expected, list) else [expected]
            return f"{subject} must be {' or '.join(_TYPE_WORDS.get(k, k) for k in kinds)}"
        if kind in ("minimum", "exclusiveMinimum"):
            return f"{subject} must be {'at least' if kind == 'minimum' else 'greater than'} {expected}"
        if kind in ("maximum", "exclusiveMaximum"):
            return f"{subject} must be {'at most' if kind == 'maximum' else 'less than'} {expected}"
        if kind == "minLength":
            return (
                f"{subject} must not be empty"
                if expected == 1
                else f"{subject} needs at least {expected} characters"
            )
        if kind == "maxLength":
            return f"{subject} must be at most {expected} characters"
        if kind == "minItems":
            return f"{subject} needs at least {expected} items"
        if kind == "maxItems":
            return f"{subject} takes at most {expected} items"
        if kind == "pattern":
            return f"{subject} must match the pattern {expected}"
        return f"{subject} does not fit the schema ({kind})"


def _compile_object(schema: Mapping[str, Any]) -> Check | None:
    """A check that returns ``True`` only for arguments the schema accepts, or ``None``
    when the schema uses keywords it does not know. ``False`` means "ask jsonschema"."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra_allowed = schema.get("additionalProperties", True)
    if (
        not schema.keys() <= _OBJECT_KEYWORDS
        or schema.get("type", "object") != "object"
        or not isinstance(properties, dict)
        or not isinstance(required, list)
        or not isinstance(extra_allowed, bool)
    ):
        return None
    checks = {name: _compile_value(sub) for name, sub in properties.items()}
    needed = frozenset(required)

    def fits(args: dict[Any, Any]) -> bool:
        if not needed <= args.keys():
            return False
        for name, value in args.items():
            if name not in checks:
                if not extra_allowed:
                    return False
                continue
            check = checks[name]
            if check is None or type(value) not in _JSON_TYPES or not check(value):
                return False
        return True

    return fits


def _compile_value(schema: Any) -> Check | None:
    """A check for one argument's value (a JSON type), or ``None`` for unknown keywords."""
    if not isinstance(schema, dict) or not schema.keys() <= _VALUE_KEYWORDS:
        return None
    checks: list[Check] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(names, list) or not names or not all(n in _IS_TYPE for n in names):
            return None
        tests = [_IS_TYPE[n] for n in names]
        checks.append(lambda v: any(test(v) for test in tests))
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not all(type(v) is str for v in values):
            return None
        allowed = frozenset(values)
        checks.append(lambda v: type(v) is str and v in allowed)
    for keyword, holds in _LENGTH_BOUNDS.items():
        if keyword in schema:
            if type(schema[keyword]) is not int:
                return None
            checks.append(_length_check(holds, schema[keyword]))
    for keyword, holds in _NUMBER_BOUNDS.items():
        if keyword in schema:
            if type(schema[keyword]) not in (int, float):
                return None
            checks.append(_number_check(holds, schema[keyword]))
    return lambda v: all(check(v) for check in checks)


def _length_check(holds: Callable[[int, int], bool], bound: int) -> Check:
    # Lengths apply to strings only; JSON Schema counts code points, as len() does.
    return lambda v: type(v) is not str or holds(len(v), bound)


def _number_check(holds: Callable[[float, float], bool], bound: float) -> Check:
    # Bounds apply to numbers only (not booleans); NaN fails every comparison: jsonschema decides.
    return lambda v: type(v) not in (int, float) or holds(v, bound)


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _error_order(error: ValidationError) -> tuple[int, int, str]:
    # Missing and unknown arguments first: fixing them often resolves the rest.
    rank = {"required": 0, "additionalProperties": 1, "type": 2}.get(str(error.validator), 3)
    return (rank, len(error.absolute_path), _path(error))
