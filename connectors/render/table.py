"""Tables as aligned monospace text, the form every chat platform can show."""

from __future__ import annotations

from connectors.render.ir import Align, Table
from connectors.render.text import display_width


def layout_lines(
    header: list[str], rows: list[list[str]], widths: list[int], aligns: list[Align]
) -> list[str]:
    """Plain cell texts as lines: the header, a ``---+---`` rule, then the rows.

    Columns are padded to ``widths`` and separated by ``" | "``; trailing spaces are
    trimmed.
    """
    lines = [_row(header, widths, aligns), "-+-".join("-" * width for width in widths)]
    lines.extend(_row(row, widths, aligns) for row in rows)
    return lines


def layout(table: Table) -> str:
    """The table as text (:attr:`Table.lines`). A table part without a header (rows moved to
    a later chunk) has neither header nor rule."""
    return "\n".join(table.lines)


def _row(cells: list[str], widths: list[int], aligns: list[Align]) -> str:
    out: list[str] = []
    for text, width, align in zip(cells, widths, aligns, strict=False):
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
    cut = count if table.header is None else count + 2  # the header and its rule
    head = Table(
        table.header,
        table.rows[:count],
        table.aligns,
        table.widths,
        table.header_plain,
        table.rows_plain[:count],
        table.lines[:cut],
    )
    tail = Table(
        None,
        table.rows[count:],
        table.aligns,
        table.widths,
        None,
        table.rows_plain[count:],
        table.lines[cut:],
    )
    return head, tail
