"""Approval gates: a tool call that a persona's ``approvals:`` names waits for a human's Approve.

The bridge asks :meth:`ApprovalGate.decide` after the capability check and runs the tool only on
an approval. A denial (with the approver's reason, if they typed one), a timeout, a run without
a human to ask, or a turn whose one asker is unknown while only the asker may approve: all
refuse the call (fail closed) with a message the model sees. "Always in this thread" keeps the
exact tool and arguments (their canonical JSON's hash) for the thread.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.interactions.kinds import asked_for
from gateway.interactions.service import Interactions
from gateway.store.db import Database
from gateway.store.interactions import add_approval_rule, has_approval_rule

__all__ = ["ApprovalGate", "ApprovalPolicy", "ApprovalsFile", "Verdict", "arguments_key", "summarize"]

MAX_SUMMARY_CHARS = 1500
_VALUE_CHARS = 300
_ARGS_SHOWN = 10


class ApprovalsFile(BaseModel):
    """persona.yaml ``approvals:``."""

    model_config = ConfigDict(extra="forbid")
    tools: list[str] = Field(
        [], description="host tools (MCP names, e.g. bash) whose every call waits for approval"
    )
    labels: list[str] = Field(
        [],
        description="capability prefixes (e.g. shell.exec): calls of any tool under them wait for approval",
    )
    approvers: Literal["asker"] | list[str] = Field(
        "asker",
        description="who may approve: 'asker' (the person the turn answers) or stable platform user ids",
    )
    timeout: float = Field(600, ge=1, le=86_400, description="seconds to wait; then the call is refused")


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    tools: tuple[str, ...]
    labels: tuple[str, ...]
    approvers: str | tuple[str, ...]  # "asker" or user ids
    timeout: float

    @classmethod
    def from_file(cls, spec: ApprovalsFile | None) -> ApprovalPolicy | None:
        if spec is None or not (spec.tools or spec.labels):
            return None
        approvers = spec.approvers if isinstance(spec.approvers, str) else tuple(spec.approvers)
        return cls(tuple(spec.tools), tuple(p.split(":", 1)[0] for p in spec.labels), approvers, spec.timeout)

    def gates(self, tool_name: str, prefixes: Iterable[str]) -> bool:
        return tool_name in self.tools or any(p in self.labels for p in prefixes)


@dataclass(frozen=True, slots=True)
class Verdict:
    approved: bool
    message: str  # for the model when refused
    detail: str  # for the audit log: who decided what


def arguments_key(args: Any) -> str:
    """The exact arguments as a short key: the hash of their canonical JSON."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def summarize(tool_name: str, args: Any, asker: str | None, secrets: Iterable[str] = ()) -> str:
    """The request as a human reads it: the tool, each argument's value (cut), who asked."""
    lines = [f"🔐 Approval needed: {tool_name}" + (f" (asked by {asker})" if asker else "")]
    items = list(args.items()) if isinstance(args, dict) else []
    for name, value in items[:_ARGS_SHOWN]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        if len(shown) > _VALUE_CHARS:
            shown = shown[: _VALUE_CHARS - 1] + "…"
        lines.append(f"• {str(name)[:40]}: {shown}")
    if len(items) > _ARGS_SHOWN:
        lines.append(f"• … and {len(items) - _ARGS_SHOWN} more")
    text = "\n".join(lines)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


class ApprovalGate:
    def __init__(self, db: Database, interactions: Interactions, secrets: Iterable[str] = ()):
        self.db = db
        self.interactions = interactions
        self.secrets = tuple(s for s in secrets if s)

    async def decide(
        self,
        policy: ApprovalPolicy,
        *,
        tool_name: str,
        args: Any,
        thread_id: int,
        run_id: int,
        call_id: str | None,
        sender_id: str | None,
        interactive: bool,
    ) -> Verdict:
        key = arguments_key(args)
        if await self.db.read(has_approval_rule, thread_id, tool_name, key):
            return Verdict(True, "", "approved: always in this thread")
        if not interactive:
            return Verdict(
                False,
                f"{tool_name} needs a human's approval and nobody can approve in this run (a schedule, "
                "background job or child agent); it was not run",
                "refused: no human to approve",
            )
        if policy.approvers == "asker":
            if sender_id is None:
                return Verdict(
                    False,
                    f"{tool_name} needs the asker's approval but this turn answers several people; it was "
                    "not run (the persona's approvals.approvers can list who may approve)",
                    "refused: no single asker to approve",
                )
            approvers: tuple[str, ...] = (sender_id,)
        else:
            approvers = tuple(policy.approvers)
        spec = {"title": summarize(tool_name, args, sender_id, self.secrets), "tool": tool_name}
        asked = asked_for("approval", spec, approvers, policy.timeout)
        row = await self.interactions.ask(thread_id, run_id, call_id, asked)
        if row.state != "answered":
            return Verdict(
                False,
                f"{tool_name} was not approved within {policy.timeout:g} seconds; it was not run",
                "refused: approval timed out",
            )
        answer = row.answer or {}
        who = row.answered_by or "?"
        decision = answer.get("decision")
        if decision == "always":
            await self.db.run_transaction(add_approval_rule, thread_id, tool_name, key, who, time.time())
        if decision in ("approve", "always"):
            return Verdict(
                True, "", f"approved by {who}" + (" (always in this thread)" if decision == "always" else "")
            )
        reason = answer.get("reason")
        because = f": {reason}" if reason else ""
        return Verdict(
            False,
            f"{tool_name} was denied by the approver{because}; it was not run. Do not retry it unchanged.",
            f"denied by {who}{because}",
        )


def unknown_tool_problems(
    policies: Iterable[tuple[str, ApprovalPolicy | None]], tools: Iterable[str]
) -> list[str]:
    """A gate naming a tool that does not exist gates nothing: say so (persona, key, the names)."""
    known = set(tools)
    problems = []
    for persona, policy in policies:
        for i, name in enumerate(policy.tools if policy is not None else ()):
            if name not in known:
                problems.append(
                    f"personas/{persona}/persona.yaml: approvals.tools[{i}]: no host tool named {name!r}; "
                    f"use a tool's MCP name, e.g. {', '.join(sorted(known)[:6])}"
                )
    return problems
