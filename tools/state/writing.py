"""``state_put``, ``state_cas`` and ``state_delete`` (label ``state.write:persona|team``)."""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.store import state
from gateway.store.state import StateQuotaError
from tools.base import HostTool, ToolContext, ToolError
from tools.state.common import (
    LIMITS,
    MAX_VALUE_BYTES,
    METADATA_SCHEMA,
    SCOPE_SCHEMA,
    TTL_SCHEMA,
    check_name,
    encode,
    expires_at,
    name_schema,
    optional_metadata,
    owner,
    quota_message,
)

PREFIX = "state.write"
_VALUE_SCHEMA: dict[str, Any] = {
    "description": f"The document: any JSON value, at most {MAX_VALUE_BYTES // 1024} KB as JSON."
}


def _target(ctx: ToolContext, args: dict[str, Any]) -> tuple[str, str, str, str]:
    scope, whose = owner(ctx, args, PREFIX)
    return scope, whose, check_name(args.get("namespace"), "namespace"), check_name(args.get("key"), "key")


def _value(args: dict[str, Any]) -> str:
    if "value" not in args:
        raise ToolError("value is required: the JSON document to store (any JSON value)")
    return encode(args["value"], "value", MAX_VALUE_BYTES)


async def put(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    scope, whose, namespace, key = _target(ctx, args)
    value, metadata, now = _value(args), optional_metadata(args), time.time()
    try:
        version = await ctx.db.run_transaction(
            state.put_document, whose, namespace, key, value, written_by=ctx.persona.name, now=now,
            limits=LIMITS, metadata=metadata, expires_at=expires_at(args, now),
        )  # fmt: skip
    except StateQuotaError as exc:
        raise ToolError(quota_message(exc, scope)) from None
    return {"namespace": namespace, "key": key, "scope": scope, "version": version}


async def cas(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    scope, whose, namespace, key = _target(ctx, args)
    expected = args.get("expected_version")
    if type(expected) is not int or expected < 0:
        raise ToolError(
            "expected_version is required: the version you read (0 to create a document that does not exist yet)"
        )
    value, metadata, now = _value(args), optional_metadata(args), time.time()
    try:
        outcome = await ctx.db.run_transaction(
            state.cas_document, whose, namespace, key, expected, value, written_by=ctx.persona.name,
            now=now, limits=LIMITS, metadata=metadata, expires_at=expires_at(args, now),
        )  # fmt: skip
    except StateQuotaError as exc:
        raise ToolError(quota_message(exc, scope)) from None
    if outcome.matched:
        return {"matched": True, "version": outcome.version}
    current = outcome.current
    return {
        "matched": False,
        "version": outcome.version,
        "value": None if current is None else json.loads(current.value),
    }


async def delete(ctx: ToolContext, args: dict[str, Any]) -> dict[str, bool]:
    _, whose, namespace, key = _target(ctx, args)
    return {
        "deleted": await ctx.db.run_transaction(state.delete_document, whose, namespace, key, time.time())
    }


PUT = HostTool(
    mcp_name="state_put",
    internal_name="state.put",
    prefix=PREFIX,
    description=(
        "Write a JSON document to Talon's durable state store (it survives restarts), replacing any "
        "earlier value. The first write creates it at version 1; each write adds 1 and returns the new "
        f"version. Values up to {MAX_VALUE_BYTES // 1024} KB of JSON; each persona, and the team, holds at "
        f"most {LIMITS.max_documents:,} documents and {LIMITS.max_bytes // 2**20} MB. scope team writes a "
        "document every persona shares (needs state.write:team). When others may write the same "
        "document, use state_cas instead."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "namespace": name_schema("Document namespace"),
            "key": name_schema("Document key"),
            "value": _VALUE_SCHEMA,
            "ttl_ms": TTL_SCHEMA,
            "metadata": METADATA_SCHEMA,
            "scope": SCOPE_SCHEMA,
        },
        "required": ["namespace", "key", "value"],
        "additionalProperties": False,
    },
    handler=put,
)

CAS = HostTool(
    mcp_name="state_cas",
    internal_name="state.cas",
    prefix=PREFIX,
    description=(
        "Compare-and-swap write to Talon's state store: the document is written only when its current "
        "version is expected_version (0: only when it does not exist yet). Returns {matched: true, "
        "version} with the new version, or {matched: false, version, value} with the current version "
        "(0 when absent) and value, so you can merge and retry at that version."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "namespace": name_schema("Document namespace"),
            "key": name_schema("Document key"),
            "expected_version": {
                "type": "integer",
                "minimum": 0,
                "description": "The version the document must have now; 0 to create it.",
            },
            "value": _VALUE_SCHEMA,
            "ttl_ms": TTL_SCHEMA,
            "metadata": METADATA_SCHEMA,
            "scope": SCOPE_SCHEMA,
        },
        "required": ["namespace", "key", "expected_version", "value"],
        "additionalProperties": False,
    },
    handler=cas,
)

DELETE = HostTool(
    mcp_name="state_delete",
    internal_name="state.delete",
    prefix=PREFIX,
    description=(
        "Delete a document from Talon's state store. Returns {deleted: true} when it existed, "
        "{deleted: false} when it did not (or had expired)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "namespace": name_schema("Document namespace"),
            "key": name_schema("Document key"),
            "scope": SCOPE_SCHEMA,
        },
        "required": ["namespace", "key"],
        "additionalProperties": False,
    },
    handler=delete,
)
