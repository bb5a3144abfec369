"""Every SQL statement of ours lives in gateway/store/: the rest of the code calls store functions.

The scan reads the string constants of every module in gateway/, connectors/ and tools/
(docstrings excluded) and fails on any that reads as a SQL statement outside gateway/store/.
The user's own queries that db_query runs are data, not constants, so nothing is exempt.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_off")  # the parser and the collector: tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "connectors", "tools")
STORE = ROOT / "gateway" / "store"

_STATEMENT = re.compile(
    r"^\s*(SELECT\s.+\sFROM\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s"
    r"|CREATE\s+(TABLE|INDEX|UNIQUE\s+INDEX|VIEW|TRIGGER)\s|ALTER\s+TABLE\s|DROP\s+(TABLE|INDEX)\s"
    r"|PRAGMA\s+\w+|BEGIN(\s+IMMEDIATE)?\b|WITH\s+\w+\s+AS\s*\()",
    re.S,
)


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _statements(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if _STATEMENT.match(node.value):
                first = node.value.strip().splitlines()[0][:70]
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {first}")
    return found


def _modules() -> list[Path]:
    paths = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if STORE in path.parents:
                continue
            paths.append(path)
    return paths


def test_no_sql_outside_the_store() -> None:
    found = [hit for path in _modules() for hit in _statements(path)]
    assert not found, "SQL outside gateway/store/ (move it into a store module):\n" + "\n".join(found)


def test_the_scan_sees_sql() -> None:
    # The detector itself: a statement of each kind is recognised, prose is not.
    for sql in (
        "SELECT id FROM threads WHERE channel = ?",
        "INSERT OR IGNORE INTO messages (a) VALUES (?)",
        "UPDATE outbox SET state = 'sent'",
        "DELETE FROM queue WHERE id = ?",
        "PRAGMA query_only = 1",
        "\n  WITH recent AS (SELECT 1) SELECT * FROM recent",
    ):
        assert _STATEMENT.match(sql), sql
    for prose in ("Select a persona from the list", "update the config, then restart"):
        assert not _STATEMENT.match(prose), prose
