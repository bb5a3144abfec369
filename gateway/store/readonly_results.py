"""Reading a result of someone else's query (``db_query``) within a byte budget.

The read-only pools (:mod:`gateway.store.readonly` for SQLite, :mod:`gateway.store.readonly_pg`
for PostgreSQL) cut every text and blob as it is read, before the row exists as Python
objects, so a result never grows past its budget in memory; a cut text ends with
``…[truncated N bytes]``, a cut blob carries ``truncated_bytes``. Values come out as SQLite
gives them whichever database answered: PostgreSQL's booleans and decimals as numbers.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["QueryResult", "ResultBudget"]

_SMALL_CELL = 8  # what a number or NULL counts against the budget


@dataclass(slots=True)
class QueryResult:
    """A query's columns and rows (blobs as ``{"base64": ...}``, cut cells marked)."""

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False


def _marker(cut: int) -> str:
    return f"…[truncated {cut:,} bytes]"


def _char_start(data: bytes | memoryview, end: int) -> int:
    """``end`` moved back to the start of the UTF-8 character it falls in."""
    while end > 0 and data[end] & 0xC0 == 0x80:
        end -= 1
    return end


class ResultBudget:
    """The bytes a result may still use; cuts long cells while the row is being read.

    Shared with :mod:`gateway.store.readonly_pg`, whose loaders call :meth:`text` and
    :meth:`blob` as a row is read, as SQLite's text factory calls :meth:`text`.
    """

    def __init__(self, total: int, cell_limit: int) -> None:
        self.left = total
        self.cell_limit = cell_limit
        self.row_used = 0
        self.row_overflows = False  # a cell of this row was cut to the budget, not the cell limit
        self.cut_any = False

    def start_row(self) -> None:
        self.row_used = 0
        self.row_overflows = False

    def end_row(self) -> None:
        self.left -= self.row_used

    def _take(self, size: int) -> int:
        """How many of ``size`` bytes the cell keeps."""
        room = max(0, min(self.cell_limit, self.left - self.row_used))
        keep = min(size, room)
        if keep < min(size, self.cell_limit):
            self.row_overflows = True
        if keep < size:
            self.cut_any = True
        return keep

    def text(self, data: bytes | memoryview) -> str:
        """UTF-8 ``data`` as text, cut to what is left (a memoryview is not copied whole)."""
        keep = self._take(len(data))
        if keep == len(data):
            self.row_used += keep
            return str(data, "utf-8", "replace")
        keep = _char_start(data, keep)
        self.row_used += keep
        return str(data[:keep], "utf-8", "replace") + _marker(len(data) - keep)

    def blob(self, data: bytes | memoryview) -> dict[str, Any]:
        """``data`` as ``{"base64": ...}``, cut to what is left (then with ``truncated_bytes``)."""
        keep = self._take(len(data))
        self.row_used += keep
        blob: dict[str, Any] = {"base64": base64.b64encode(data[:keep]).decode("ascii")}
        if keep < len(data):
            blob["truncated_bytes"] = len(data) - keep
        return blob

    def cell(self, value: Any) -> Any:
        """A fetched value as JSON; text (and PostgreSQL's blobs) were already cut as they were read."""
        if isinstance(value, bytes):
            return self.blob(value)
        if isinstance(value, str | dict):
            return value
        if self.left - self.row_used < _SMALL_CELL:
            self.row_overflows = True
        self.row_used += _SMALL_CELL
        return _json_number(value)


def _json_number(value: Any) -> Any:
    """A number (or PostgreSQL's boolean or decimal) as SQLite would give it."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if value is None or isinstance(value, int | float):
        return value
    return str(value)  # any other PostgreSQL type, as its text
