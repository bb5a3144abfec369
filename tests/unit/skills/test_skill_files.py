"""SKILL.md checks: front matter errors name the file and the key; size, links that leave the
folder and files that lead out of it are refused; arguments replace $ARGUMENTS."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.skills import MAX_SKILL_BYTES, SkillError, catalog, load_folder, render_skill_md
from tools.skills.procedure_write import describe
from tools.skills.skill import instructions


def _write(root: Path, name: str, text: str) -> Path:
    folder = root / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no front matter\n", "skills/s/SKILL.md: must start with YAML front matter"),
        ("---\nname: s\n", "skills/s/SKILL.md: the front matter has no closing '---' line"),
        ("---\nname: [\n---\n", "skills/s/SKILL.md: the front matter is not valid YAML"),
        ("---\ndescription: d\n---\n", "skills/s/SKILL.md: name: missing"),
        ("---\nname: other\ndescription: d\n---\n", "name: 'other' must be the folder's name, 's'"),
        (
            "---\nname: s\ndescription: d\nmode: later\n---\n",
            "skills/s/SKILL.md: mode: 'later' must be inline or fork",
        ),
        (
            "---\nname: s\ndescription: d\nallowed_tools: grep\n---\n",
            "skills/s/SKILL.md: allowed_tools: must be a list",
        ),
        ("---\nname: s\ndescription: d\ncolour: red\n---\n", "skills/s/SKILL.md: colour: unknown key"),
        (
            "---\nname: s\ndescription: d\n---\nsee [x](../../talon.yaml)\n",
            "the link '../../talon.yaml' leaves",
        ),
        ("---\nname: s\ndescription: d\n---\nsee [x](/etc/passwd)\n", "the link '/etc/passwd' leaves"),
    ],
)
def test_a_bad_skill_md_is_refused_naming_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    folder = _write(tmp_path, "s", text)
    with pytest.raises(SkillError, match=None) as caught:
        load_folder(folder)
    assert expected in str(caught.value)


def test_a_huge_skill_md_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    folder = _write(tmp_path, "s", "---\nname: s\ndescription: d\n---\n" + "x" * MAX_SKILL_BYTES)
    with pytest.raises(SkillError, match="larger than 64 KB"):
        load_folder(folder)


def test_a_good_skill_lists_its_files_but_none_that_lead_out_of_its_folder(tmp_path: Path) -> None:
    folder = _write(
        tmp_path,
        "s",
        "---\nname: s\ndescription: does\n  things\nmode: fork\nmodel: fake:m\n---\nBody [a](docs/a.md)\n",
    )
    (folder / "docs").mkdir()
    (folder / "docs" / "a.md").write_text("a")
    (tmp_path / "secret.txt").write_text("s")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "outside").symlink_to(tmp_path, target_is_directory=True)
    skill = load_folder(folder)
    assert (skill.name, skill.description, skill.mode, skill.model) == ("s", "does things", "fork", "fake:m")
    assert skill.files == ("docs/a.md",)


def test_the_catalog_prefers_the_operators_skill_and_reports_broken_ones(tmp_path: Path) -> None:
    _write(tmp_path, "meeting-notes", "---\nname: meeting-notes\ndescription: ours\n---\nx\n")
    _write(tmp_path, "broken", "---\nname: broken\n---\n")
    found, problems = catalog(tmp_path)
    assert found["meeting-notes"].description == "ours"
    assert found["release-notes"].description.startswith("Write user-facing release notes")
    assert problems == [
        "skills/broken/SKILL.md: description: missing; every skill needs a name and a description"
    ]


def test_arguments_replace_the_placeholder_or_follow_the_body(tmp_path: Path) -> None:
    with_placeholder = load_folder(
        _write(tmp_path, "a", "---\nname: a\ndescription: d\n---\nDo $ARGUMENTS now.\n")
    )
    without = load_folder(_write(tmp_path, "b", "---\nname: b\ndescription: d\n---\nDo it.\n"))
    assert instructions(with_placeholder, " the thing ") == "Do the thing now."
    assert instructions(with_placeholder, "") == "Do (none given) now."
    assert instructions(without, "x") == "Do it.\n\n## Arguments\nx"
    assert instructions(without, "") == "Do it."


def test_a_procedure_draft_is_a_valid_skill(tmp_path: Path) -> None:
    content = "\n\n## Deploy: the steps: [a] `x`\n1. go\n"
    folder = tmp_path / "skills" / "deploy-steps"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(render_skill_md("deploy-steps", describe(content), content))
    skill = load_folder(folder)
    assert skill.description == "Deploy: the steps: [a] `x`"
    assert skill.body.endswith("1. go")
