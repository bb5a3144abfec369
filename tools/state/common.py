"""What the state tools share: names, scopes, limits, JSON encoding and the result shapes.

A call's ``scope`` says whose documents it reaches: ``persona`` (the default) this persona's
own, ``team`` those shared by every persona. The labels decide which a persona may use
(:data:`gateway.labels.STATE_SCOPES`): ``state.read:team`` opens both, ``state.read:persona``
only the persona's own; likewise ``state.write``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from gateway import jsonsafe
from gateway.labels import STATE_SCOPES, granted_scopes
from gateway.store.state import TEAM, StateDocument, StateLimits, StateQuotaError, persona_owner
from tools.base import ToolContext, ToolError

MAX_NAME_CHARS = 128
MAX_VALUE_BYTES = 64 * 1024
MAX_METADATA_BYTES = 4 * 1024
MAX_TTL_MS = 366 * 24 * 3600 * 1000
LIMITS = StateLimits(max_documents=10_000, max_bytes=64 * 1024 * 1024)  # per persona, and for the team
SCOPES = ("persona", "team")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def name_schema(what: str) -> dict[str, Any]:
    return {
        "type": "string",
        "description": f"{what}: letters, digits, '_', '.' and '-', at most {MAX_NAME_CHARS} characters.",
    }


SCOPE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "enum": list(SCOPES),
    "description": "persona (default): this persona's own documents; team: documents shared by every persona.",
}
TTL_SCHEMA: dict[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": MAX_TTL_MS,
    "description": "Time to live in milliseconds from this write; an expired document reads as absent. "
    "Omit to keep it until deleted (a write without ttl_ms clears an earlier one).",
}
METADATA_SCHEMA: dict[str, Any] = {
    "description": f"Optional JSON for the audit trail (who, why), at most {MAX_METADATA_BYTES // 1024} KB; "
    "never returned by state_get or state_query.",
}


def check_name(value: Any, what: str) -> str:
    """``value`` as a namespace, key or cursor, or a :class:`ToolError` saying what to send."""
    if not isinstance(value, str) or not value:
        raise ToolError(f"{what} is required: a non-empty string of letters, digits, '_', '.' and '-'")
    if len(value) > MAX_NAME_CHARS:
        raise ToolError(f"{what} is {len(value)} characters; the limit is {MAX_NAME_CHARS}")
    if not _NAME.fullmatch(value):
        raise ToolError(f"{what} may hold only letters, digits, '_', '.' and '-' (no spaces or '/')")
    return value


def owner(ctx: ToolContext, args: dict[str, Any], prefix: str) -> tuple[str, str]:
    """(scope, store owner) of the call, refused when the persona's labels do not open the scope."""
    scope = args.get("scope") or "persona"
    held = granted_scopes(ctx.persona.capabilities, prefix)
    if scope not in {s for word in held for s in STATE_SCOPES.get(word, ())}:
        labels = ", ".join(f"{prefix}:{w}" for w in sorted(held)) or "none"
        raise ToolError(
            f"scope {scope!r} needs the label '{prefix}:{scope}', which this persona does not hold "
            f"(it holds {labels}); leave scope out to use this persona's own documents"
        )
    return scope, TEAM if scope == "team" else persona_owner(ctx.persona.name)


def encode(value: Any, what: str, max_bytes: int) -> str:
    """``value`` as compact JSON text, refused when it is not JSON, too large or too deep."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise ToolError(f"{what} is nested deeper than {jsonsafe.MAX_DEPTH} levels; flatten it") from None
    except (ValueError, TypeError):
        raise ToolError(f"{what} must be a JSON value (NaN and Infinity are not JSON)") from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ToolError(
            f"{what} is {size:,} bytes of JSON; the limit is {max_bytes:,}: store less, or split it over several keys"
        )
    # Fewer brackets than the cap cannot nest past it; only the rest is decoded and walked.
    if text.count("[") + text.count("{") > jsonsafe.MAX_DEPTH:
        try:
            jsonsafe.loads(text, max_bytes=max_bytes)
        except jsonsafe.JSONInputError as exc:
            raise ToolError(f"{what}: {exc}; flatten it") from None
    return text


def optional_metadata(args: dict[str, Any]) -> str | None:
    if args.get("metadata") is None:
        return None
    return encode(args["metadata"], "metadata", MAX_METADATA_BYTES)


def expires_at(args: dict[str, Any], now: float) -> float | None:
    ttl = args.get("ttl_ms")
    return None if ttl is None else now + float(ttl) / 1000


def quota_message(exc: StateQuotaError, scope: str) -> str:
    whose = "the team's" if scope == "team" else "this persona's"
    held = f"{exc.usage.documents:,} documents" if exc.cap == "documents" else f"{exc.usage.bytes:,} bytes"
    return (
        f"{whose} state holds {held}; the cap is {exc.limit:,} {exc.cap}. Nothing was written: "
        "delete documents you no longer need (state_delete), or give temporary ones a ttl_ms"
    )


def when(ts: float | None, ctx: ToolContext) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, ZoneInfo(ctx.settings.timezone)).isoformat(timespec="milliseconds")


def shown(document: StateDocument, ctx: ToolContext) -> dict[str, Any]:
    """A document as the model reads it (its metadata is never shown)."""
    return {
        "key": document.key,
        "value": json.loads(document.value),
        "version": document.version,
        "updated_at": when(document.updated_at, ctx),
        "expires_at": when(document.expires_at, ctx),
        "written_by": document.written_by,
    }
