"""The generated parts of docs/ match the code: the config reference, the persona.yaml key
tables and the capability labels are rendered afresh and compared with the pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, Field

from gateway import reference_docs
from gateway.labels import label_problem
from gateway.persona_mcp.settings import parse_mcp_servers
from gateway.personas import PersonaFile
from gateway.subagents.definitions import parse_definition

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("page", sorted(reference_docs.PAGES))
def test_the_generated_docs_match_the_code(page: str) -> None:
    current = (DOCS / page).read_text(encoding="utf-8")
    fresh = reference_docs.render_page(page, current)
    assert fresh == current, (
        f"docs/{page} is out of date with the code; run `{reference_docs.COMMAND}` from the repository root"
    )


def test_check_names_a_stale_page_and_write_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for page in reference_docs.PAGES:
        (tmp_path / page).write_text((DOCS / page).read_text(encoding="utf-8"), encoding="utf-8")
    stale = (tmp_path / "capabilities.md").read_text().replace("`channel_send`", "`channel_post`", 1)
    (tmp_path / "capabilities.md").write_text(stale)

    assert reference_docs.main(["--check", "--docs", str(tmp_path)]) == 1
    assert (
        "capabilities.md is out of date; run `python -m gateway.reference_docs --write`"
        in capsys.readouterr().err
    )
    assert reference_docs.main(["--write", "--docs", str(tmp_path)]) == 0
    assert reference_docs.stale_pages(tmp_path) == []


def test_every_config_key_is_in_the_reference() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for path in ("channels[].pacing.burst", "channels[].rate_limit.window", "providers.<name>.base_url"):
        assert f"| `{path}` |" in text
    assert "| `channels[].send_timeout` | number, > 0 | `60` |" in text  # discord's own key


def test_a_key_without_a_description_stops_the_generator() -> None:
    class Undocumented(BaseModel):
        documented: int = Field(1, description="has one")
        bare: int = 2

    with pytest.raises(ValueError, match=r"Undocumented\.bare has no Field\(description=\.\.\.\)"):
        reference_docs.rows(Undocumented)


def test_a_page_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="persona-keys"):
        reference_docs.render_page("personas.md", "# Personas\n")


def test_the_examples_in_the_personas_page_are_valid() -> None:
    text = (DOCS / "personas.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(yaml|markdown)\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    for kind, body in blocks:
        if kind == "markdown":
            definition, problems = parse_definition(body, "docs/personas.md")
            assert definition is not None, problems
            continue
        raw = yaml.safe_load(body)
        if "model" in raw:
            spec = PersonaFile.model_validate(raw)
            assert [label_problem(label) for label in spec.capabilities] == [None] * len(spec.capabilities)
        if "mcp_servers" in raw:
            assert parse_mcp_servers("example", raw["mcp_servers"])[1] == []
