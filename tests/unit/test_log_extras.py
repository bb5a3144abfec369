"""Logging calls never name a reserved ``LogRecord`` attribute in ``extra``.

Such a call raises ``KeyError`` when the record is made, which happens only at a level
that is enabled: the error path it sits in breaks in production and nowhere else.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("collector_off")  # the parser and the collector: tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "connectors", "tools", "bench")
RESERVED = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def _extra_calls() -> list[tuple[str, int, ast.expr]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LOG_METHODS
                ):
                    continue
                for kw in node.keywords:
                    if kw.arg == "extra":
                        found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.lineno, kw.value))
    return found


def test_the_scan_sees_the_codebase_logging_calls() -> None:
    assert len(_CALLS) >= 5


_CALLS = _extra_calls()


@pytest.mark.parametrize(("where", "value"), [(w, v) for w, _, v in _CALLS], ids=[w for w, _, _ in _CALLS])
def test_extra_keys_are_not_log_record_attributes(where: str, value: ast.expr) -> None:
    assert isinstance(value, ast.Dict), f"{where}: pass extra= as a dict literal so it can be checked"
    keys = []
    for key in value.keys:
        assert isinstance(key, ast.Constant) and isinstance(key.value, str), f"{where}: non-literal key"
        keys.append(key.value)
    clashing = sorted(set(keys) & RESERVED)
    assert not clashing, f"{where}: extra keys {clashing} overwrite LogRecord attributes"


def test_a_reserved_key_does_raise_at_an_enabled_level() -> None:
    """What the scan guards against: the record is made only when the level is enabled."""
    logger = logging.getLogger("talon.test.extras")
    logger.setLevel(logging.INFO)
    logger.debug("not made", extra={"thread": "x"})
    with pytest.raises(KeyError):
        logger.info("made", extra={"thread": "x"})
