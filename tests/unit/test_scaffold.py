"""`talon init DIR --data-dir PATH`: the written config keeps its state where PATH says."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import load_settings
from gateway.scaffold import write_scaffold


def test_init_without_data_dir_keeps_data_inside_the_config_dir(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "bot")]) == 0
    assert load_settings(tmp_path / "bot" / "talon.yaml").data_path == (tmp_path / "bot" / "data").resolve()


def test_init_with_an_absolute_data_dir_as_in_the_compose_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "volume"
    assert main(["init", str(tmp_path / "config"), "--data-dir", str(data)]) == 0
    settings = load_settings(tmp_path / "config" / "talon.yaml")
    assert settings.data_path == data.resolve()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("data_dir", ["../state", "my data: 1", "#state", "~"])
def test_a_data_dir_yaml_would_misread_is_written_so_it_reads_back(tmp_path: Path, data_dir: str) -> None:
    write_scaffold(tmp_path / "cfg", data_dir=data_dir)
    settings = load_settings(tmp_path / "cfg" / "talon.yaml")
    assert settings.data_path == (tmp_path / "cfg" / data_dir).resolve()
