"""Tables as aligned monospace text, the form every chat platform can show."""

from __future__ import annotations

from connectors.render.ir import Table
from connectors.render.text import display_width


def layout(table: Table) -> str:
    """The table as lines of text: header, a ``---+---`` rule, then the rows.

    Columns are padded to :attr:`Table.widths` and separated by ``" | "``; trailing
    spaces are trimmed. A table part without a header (rows moved to a later chunk) has
    neither header nor rule.
    """
    lines: list[str] = []
    if table.header_plain is not None:
        lines.append(_row(table, table.header_plain))
        lines.append("-+-".join("-" * width for width in table.widths))
    lines.extend(_row(table, row) for row in table.rows_plain)
    return "\n".join(lines)


def _row(table: Table, cells: list[str]) -> str:
    out: list[str] = []
    for text, width, align in zip(cells, table.widths, table.aligns, strict=False):
        gap = width - display_width(text)
        if align == "right":
            text = " " * gap + text
        elif align == "center":
            left = gap // 2
            text = " " * left + text + " " * (gap - left)
        else:
            text += " " * gap
        out.append(text)
    return " | ".join(out).rstrip()


def split_rows(table: Table, count: int) -> tuple[Table, Table]:
    """The table cut after ``count`` body rows: the head keeps the header, the tail has none."""
    head = Table(
        table.header,
        table.rows[:count],
        table.aligns,
        table.widths,
        table.header_plain,
        table.rows_plain[:count],
    )
    tail = Table(None, table.rows[count:], table.aligns, table.widths, None, table.rows_plain[count:])
    return head, tail
