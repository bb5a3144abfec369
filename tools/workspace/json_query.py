"""``json_query``: a bounded jq subset over a JSON file.

The grammar is exactly the reference's: ``.``, ``.field`` and ``.field.nested``, ``.[N]``
(negative from the end), ``.[N:M]``, ``.[]``, stages joined with ``|``, ``keys`` and
``length``. Steps chain (``.items[0].name``, ``.items[] | .id``); a field that is not a plain
name is quoted (``."content-type"``). The file is decoded with :mod:`gateway.jsonsafe`'s
bounds (size and nesting); ``max_results`` bounds how many array elements or outputs come back
and ``max_bytes`` the serialized size; hitting either sets ``truncated``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from gateway.jsonsafe import JSONInputError, loads
from tools.base import HostTool, ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular

__all__ = ["TOOL", "evaluate", "parse_query", "query_file"]

MAX_SOURCE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 256
MAX_QUERY_CHARS = 1000
DEFAULT_RESULTS = 100
DEFAULT_BYTES = 51_200
MAX_BYTES_CEILING = 1_048_576

_STEP = re.compile(
    r"""\.(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|"(?P<quoted>(?:[^"\\]|\\.)*)")?"""
    r"""|\[(?:(?P<index>-?\d+)|(?P<start>-?\d*):(?P<stop>-?\d*)|(?P<iterate>))\]"""
)
_FUNCTIONS = {"keys", "length"}
SYNTAX = ".field, .a.b, .[N], .[N:M], .[], keys, length, joined with |"


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # field, index, slice, iterate, keys, length, identity
    key: Any = None
    stop: Any = None


def _refuse(query: str, why: str) -> ToolError:
    return ToolError(f"query {query[:100]!r}: {why}; json_query takes the jq subset {SYNTAX}")


def _parse_stage(stage: str, query: str) -> list[_Step]:
    text = stage.strip()
    if text in _FUNCTIONS:
        return [_Step(text)]
    if text == ".":
        return [_Step("identity")]
    if not text.startswith("."):
        raise _refuse(query, f"{text[:40]!r} is not supported")
    steps: list[_Step] = []
    at = 0
    while at < len(text):
        match = _STEP.match(text, at)
        if match is None or match.end() == at:
            raise _refuse(query, f"cannot read {text[at : at + 20]!r}")
        if match["name"] is not None:
            steps.append(_Step("field", match["name"]))
        elif match["quoted"] is not None:
            steps.append(_Step("field", json.loads(f'"{match["quoted"]}"')))
        elif match["index"] is not None:
            steps.append(_Step("index", int(match["index"])))
        elif match["iterate"] is not None:
            steps.append(_Step("iterate"))
        elif match.group(0).startswith("["):
            start = int(match["start"]) if match["start"] else None
            stop = int(match["stop"]) if match["stop"] else None
            steps.append(_Step("slice", start, stop))
        # a lone "." before "[" adds nothing
        at = match.end()
    return steps or [_Step("identity")]


def parse_query(query: str) -> list[_Step]:
    """The steps of ``query``, or a :class:`ToolError` naming the supported syntax."""
    if not query.strip() or len(query) > MAX_QUERY_CHARS:
        raise ToolError(f"query must be 1 to {MAX_QUERY_CHARS} characters, e.g. '.items[] | .id'")
    steps: list[_Step] = []
    for stage in query.split("|"):
        steps += _parse_stage(stage, query)
    return steps


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _apply(step: _Step, value: Any, query: str) -> list[Any]:
    kind = step.kind
    if kind == "identity":
        return [value]
    if kind == "field":
        if value is None:
            return [None]
        if not isinstance(value, dict):
            raise _refuse(
                query, f"cannot read field {step.key!r} of {_kind(value)} (use .[] first for an array)"
            )
        return [value.get(step.key)]
    if kind in ("index", "slice"):
        if value is None:
            return [None]
        if not isinstance(value, list):
            raise _refuse(query, f"cannot index {_kind(value)} with a number (use .field for an object)")
        if kind == "index":
            return [value[step.key] if -len(value) <= step.key < len(value) else None]
        return [value[step.key : step.stop]]
    if kind == "iterate":
        if isinstance(value, list):
            return list(value)
        if isinstance(value, dict):
            return list(value.values())
        raise _refuse(query, f"cannot iterate over {_kind(value)}")
    if kind == "keys":
        if isinstance(value, dict):
            return [sorted(value)]
        if isinstance(value, list):
            return [list(range(len(value)))]
        raise _refuse(query, f"{_kind(value)} has no keys")
    if value is None:  # length
        return [0]
    if isinstance(value, (list, dict, str)):
        return [len(value)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [abs(value)]
    raise _refuse(query, f"{_kind(value)} has no length")


def evaluate(steps: list[_Step], document: Any, query: str, max_results: int) -> tuple[list[Any], bool, bool]:
    """The outputs, whether the query streams (used ``.[]``), and whether max_results cut them."""
    outputs = [document]
    streams = False
    cut = False
    for step in steps:
        streams = streams or step.kind == "iterate"
        nxt: list[Any] = []
        for value in outputs:
            nxt.extend(_apply(step, value, query))
            if len(nxt) > max_results:
                nxt = nxt[:max_results]
                cut = True
                break
        outputs = nxt
    return outputs, streams, cut


def _fit(result: Any, max_results: int, max_bytes: int) -> tuple[Any, bool]:
    """``result`` within ``max_results`` elements and ``max_bytes`` serialized."""
    cut = False
    if isinstance(result, list) and len(result) > max_results:
        result, cut = result[:max_results], True
    size = len(json.dumps(result, ensure_ascii=False).encode())
    if size <= max_bytes:
        return result, cut
    if isinstance(result, list):
        kept, used = [], 2
        for item in result:
            piece = len(json.dumps(item, ensure_ascii=False).encode()) + 2  # ", " as the result is sent
            if used + piece > max_bytes:
                break
            kept.append(item)
            used += piece
        return kept, True
    text = json.dumps(result, ensure_ascii=False)
    return text.encode()[:max_bytes].decode("utf-8", "ignore"), True


def query_file(
    roots: WorkspaceRoots, path: Any, query: str, max_results: int, max_bytes: int
) -> dict[str, Any]:
    steps = parse_query(query)
    with roots.resolved(path, what="path") as resolved:
        fd, st = open_regular(resolved, what="path")
    try:
        if st.st_size > MAX_SOURCE_BYTES:
            raise ToolError(
                f"path {resolved.virtual!r} is {st.st_size} bytes, more than json_query's {MAX_SOURCE_BYTES}-byte "
                "limit; use grep to find the part you need"
            )
        data = os.pread(fd, MAX_SOURCE_BYTES + 1, 0)
    finally:
        os.close(fd)
    try:
        document = loads(data, max_bytes=MAX_SOURCE_BYTES, max_depth=MAX_DEPTH)
    except JSONInputError as exc:
        raise ToolError(
            f"path {resolved.virtual!r} is not usable JSON: {exc}; read_file shows what it holds"
        ) from None
    outputs, streams, cut = evaluate(steps, document, query, max_results)
    result: Any = outputs if streams else outputs[0]
    kind = "stream" if streams else _kind(result)
    result, cut_more = _fit(result, max_results, max_bytes)
    return {"result": result, "type": kind, "truncated": cut or cut_more, "source_size": st.st_size}


async def handle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    roots = WorkspaceRoots.for_call(ctx, "read")
    return await asyncio.to_thread(
        query_file,
        roots,
        args["path"],
        args["query"],
        int(args.get("max_results", DEFAULT_RESULTS)),
        int(args.get("max_bytes", DEFAULT_BYTES)),
    )


TOOL = HostTool(
    mcp_name="json_query",
    internal_name="fs.json_query",
    prefix="fs.read",
    description=(
        "Run a bounded jq-subset query on a JSON file without loading it fully into context. Returns "
        "{result, type, truncated, source_size}. Queries: . | .field | .field.nested | .[N] (negative from "
        "the end) | .[N:M] | .[] | .[] | .field | keys | length. max_results bounds array element count and "
        "max_bytes the serialized size; hitting either sets truncated: true."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute or relative path to the JSON file."},
            "query": {"type": "string", "description": "Query expression (e.g. .name, .[0], .[] | .id)."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10_000,
                "description": f"Max array elements to return (default {DEFAULT_RESULTS}).",
            },
            "max_bytes": {
                "type": "integer",
                "minimum": 64,
                "maximum": MAX_BYTES_CEILING,
                "description": f"Max serialized output size in bytes (default {DEFAULT_BYTES}).",
            },
        },
        "required": ["path", "query"],
        "additionalProperties": False,
    },
    handler=handle,
)
