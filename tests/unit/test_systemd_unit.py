"""deploy/talon.service passes `systemd-analyze verify`.

verify refuses a unit whose ExecStart binary does not exist, and /opt/talon/.venv is not
installed on a test machine; the test verifies a copy whose ExecStart names the ``talon``
script of the running interpreter's environment instead, every other line unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "talon.service"
INSTALLED = "/opt/talon/.venv/bin/talon"  # docs/operations.md installs Talon there

systemd_analyze = shutil.which("systemd-analyze")


def test_the_unit_runs_the_venv_install_the_docs_describe() -> None:
    (exec_start,) = [line for line in UNIT.read_text().splitlines() if line.startswith("ExecStart=")]
    assert exec_start == f"ExecStart={INSTALLED} run --log-format json"


@pytest.mark.skipif(systemd_analyze is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    talon = Path(sys.executable).parent / "talon"
    if not talon.is_file():
        pytest.skip(f"no talon script beside {sys.executable} to stand in for {INSTALLED}")
    copy = tmp_path / "talon.service"  # verify wants the unit's own name
    copy.write_text(UNIT.read_text().replace(f"ExecStart={INSTALLED} ", f"ExecStart={talon} "))
    assert str(talon) in copy.read_text()
    result = subprocess.run(
        [str(systemd_analyze), "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, output
    assert "talon.service" not in output, output  # no warnings about the unit either
