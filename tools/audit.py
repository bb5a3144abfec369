"""The host-tool audit log: every bridge decision and every result status, one row each.

Rows never hold argument values, which may be secrets: a call is summarised by its
argument names (plus the value of the tool's scope argument, an operator-configured
name such as a channel), and error texts are truncated with token-like strings masked.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.store.audit import AuditRow, add_entries
from gateway.store.db import Database

__all__ = ["AuditEntry", "AuditLog", "redact", "summarize_args"]

log = logging.getLogger("talon.bridge")

Decision = Literal["allowed", "refused", "result", "approval"]
Status = Literal["ok", "error", "timeout"]

MAX_DETAIL = 300
_MASK = "[redacted]"
# Long runs of token alphabet characters (API keys, bearer tokens, secrets in URLs).
_TOKENISH = re.compile(r"[A-Za-z0-9_\-+/=.]{24,}")
_ASSIGNED = re.compile(r"(?i)\b(password|passwd|secret|token|api[_-]?key|authorization)(\s*[=:]\s*)(\S+)")
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)(\S+)")
_SCOPE_VALUE_CHARS = 64


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit row.

    Attributes:
        run_id (:obj:`int` | :obj:`None`): The run the request claimed or belongs to.
        thread_id (:obj:`int` | :obj:`None`): The thread the request claimed or belongs to.
        persona (:obj:`str` | :obj:`None`): The persona the request claimed or belongs to.
        tool (:obj:`str` | :obj:`None`): The tool's MCP name as requested.
        decision (:obj:`str`): ``allowed``, ``refused``, ``result`` or ``approval`` (a request
            for approval, then its outcome: status ``ok`` approved, ``error`` denied, ``timeout``).
        status (:obj:`str` | :obj:`None`): For results: ``ok``, ``error`` or ``timeout``.
        detail (:obj:`str` | :obj:`None`): A short, redacted explanation.
    """

    run_id: int | None
    thread_id: int | None
    persona: str | None
    tool: str | None
    decision: Decision
    status: Status | None = None
    detail: str | None = None


class AuditLog:
    """Writes :class:`AuditEntry` rows to the ``audit_log`` table.

    Rows are buffered and written together a few milliseconds later (at most one
    transaction per ``flush_delay`` window), so recording never adds a database round trip
    to a tool call. :meth:`flush` writes what is buffered now; the daemon calls it when it
    stops. A crash can lose the rows of the last window (and of a batch being written).

    Args:
        db (:class:`gateway.store.db.Database`): The daemon's database.
        secrets (Iterable[:obj:`str`]): Configured secret values, masked wherever they appear.
        flush_delay (:obj:`float`, optional): Seconds between batch writes.
    """

    def __init__(self, db: Database, secrets: Iterable[str] = (), *, flush_delay: float = 0.005):
        self._db = db
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._delay = flush_delay
        self._rows: list[AuditRow] = []
        self._writer: asyncio.Task[None] | None = None

    def record(self, entry: AuditEntry) -> None:
        """Buffer one row; it is written with the next batch."""
        self._rows.append(
            AuditRow(
                time.time(),
                entry.run_id,
                entry.thread_id,
                entry.persona,
                entry.tool,
                entry.decision,
                entry.status,
                redact(entry.detail, self._secrets) if entry.detail else None,
            )
        )
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_soon(), name="audit-writer")

    async def flush(self) -> None:
        """Write every buffered row now."""
        while self._rows:
            await self._write()
        if self._writer is not None and not self._writer.done():
            await asyncio.gather(self._writer, return_exceptions=True)

    async def _write_soon(self) -> None:
        # Rows recorded while a batch is written wait for the next window: under steady
        # calls that is one transaction per window, not one per call.
        while self._rows:
            await asyncio.sleep(self._delay)
            await self._write()

    async def _write(self) -> None:
        rows, self._rows = self._rows, []
        try:
            await self._db.run_transaction(add_entries, rows)
        except Exception:
            log.exception("could not write %d audit rows", len(rows))


def summarize_args(args: Mapping[str, Any] | Any, scope_arg: str | None = None) -> str:
    """``args: a, b, channelId='team-slack'``: argument names, and only the scope argument's value."""
    if not isinstance(args, Mapping):
        return f"args: not an object ({type(args).__name__})"
    if not args:
        return "args: none"
    parts = []
    for name in sorted(args, key=str)[:20]:
        value = args[name]
        if name == scope_arg and isinstance(value, str):
            parts.append(f"{name}={value[:_SCOPE_VALUE_CHARS]!r}")
        else:
            parts.append(str(name)[:40])
    more = f", +{len(args) - 20} more" if len(args) > 20 else ""
    return "args: " + ", ".join(parts) + more


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask secrets and token-like strings, then truncate to :data:`MAX_DETAIL` characters."""
    for secret in secrets:
        text = text.replace(secret, _MASK)
    for pattern in (_ASSIGNED, _BEARER):
        text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)
    text = _TOKENISH.sub(_MASK, text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"
