"""Skills and procedures in real turns: the system prompt names a persona's skills without their
instructions, the skill tool loads one with its arguments and reads its files, an unlisted
skill is refused; a procedure written with procedure_write is found by memory_search at once
but runs as a skill only after `talon skills approve` (run as a subprocess) approved it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, load_settings
from gateway.personas import load_personas
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config

REPO = Path(__file__).resolve().parents[3]


def _skill(root: Path, name: str, body: str, description: str = "check a deploy") -> None:
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n{textwrap.dedent(body)}", encoding="utf-8"
    )


def _scripted(steps: list[Call]) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(steps):
            return Reply(tool_calls=[steps[len(results)]])
        return Reply(text=json.dumps(results))

    return respond


def _results(turn_text: str) -> list[tuple[bool, Any]]:
    out = []
    for error, text in json.loads(turn_text):
        try:
            out.append((error, json.loads(text)))
        except json.JSONDecodeError:
            out.append((error, text))
    return out


async def test_a_listed_skill_loads_inline_with_its_arguments_and_files_and_an_unlisted_one_is_refused(
    tmp_path: Path,
) -> None:
    _skill(
        tmp_path,
        "deploy-check",
        "Check the deploy of $ARGUMENTS against [the list](checklist.md).\n",
    )
    (tmp_path / "skills" / "deploy-check" / "checklist.md").write_text("- health endpoint answers\n")
    # A link that leads out of the folder is never listed as one of the skill's files.
    (tmp_path / "skills" / "deploy-check" / "escape.md").symlink_to(tmp_path / "talon.yaml")
    steps = [
        Call("skill", {"name": "deploy-check", "arguments": "v2.3 on staging"}),
        Call("skill", {"name": "deploy-check", "file": "checklist.md"}),
        Call("skill", {"name": "release-notes"}),
    ]
    async with FakeAnthropic(responder=_scripted(steps)) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={
                "assistant": {"capabilities": ["skill.use"], "skills": ["deploy-check", "meeting-notes"]}
            },
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "is the deploy fine?")
        system = json.dumps(fake.requests[0]["system"])
    loaded, file, unlisted = _results(turn.text)
    assert "## Skills" in system and "deploy-check: check a deploy" in system
    assert "meeting-notes: Turn a chat discussion into notes" in system
    assert "Check the deploy of" not in system  # instructions only once the model asks
    assert loaded == (
        False,
        {
            "skill": "deploy-check",
            "mode": "inline",
            "instructions": "Check the deploy of v2.3 on staging against [the list](checklist.md).",
            "files": ["checklist.md"],
        },
    )
    assert file == (
        False,
        {"skill": "deploy-check", "file": "checklist.md", "content": "- health endpoint answers\n"},
    )
    assert unlisted[0] is True
    assert "no skill named 'release-notes'" in unlisted[1] and "deploy-check, meeting-notes" in unlisted[1]


def test_an_unknown_skill_in_persona_yaml_and_a_broken_skill_md_are_config_errors(tmp_path: Path) -> None:
    _skill(tmp_path, "deploy-check", "steps\n")
    (tmp_path / "skills" / "broken").mkdir()
    (tmp_path / "skills" / "broken" / "SKILL.md").write_text("---\nname: broken\nmode: later\n---\nx\n")
    config = write_config(
        tmp_path,
        provider={"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "none"},
        personas={"assistant": {"skills": ["deploy-chek"]}},
    )
    with pytest.raises(ConfigError) as caught:
        load_personas(load_settings(config))
    problems = "\n".join(caught.value.problems)
    assert "personas/assistant/persona.yaml: skills[0]: no skill named 'deploy-chek'" in problems
    assert "deploy-check" in problems and "meeting-notes" in problems
    assert "skills/broken/SKILL.md: description: missing" in problems


async def _approve(config: Path, persona: str, name: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "skills",
        "approve",
        persona,
        name,
        "-c",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_a_procedure_is_searchable_at_once_and_a_skill_only_after_talon_skills_approve(
    tmp_path: Path,
) -> None:
    procedure = "# Rotate the API key\n\n1. Create the new key.\n2. Deploy it.\n3. Revoke the old one.\n"
    turns = [
        [
            Call("procedure_write", {"name": "rotate-api-key", "content": procedure}),
            Call("memory_search", {"query": "revoke"}),
            Call("skill", {"name": "rotate-api-key"}),
        ],
        [Call("skill", {"name": "rotate-api-key"})],
    ]

    def respond(body: dict[str, Any]) -> Reply:
        return _scripted(turns[0])(body)

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["skill.use", "memory.access:thread"]}},
        )
        async with running_gateway(config) as gw:
            first = await say(gw, "remember how we rotate keys")
            listing = await asyncio.to_thread(_run_cli, config, "list")
            code, said = await _approve(config, "assistant", "rotate-api-key")
            turns.pop(0)
            second = await say(gw, "rotate the key", thread="other")
        system_after = json.dumps(fake.requests[-1]["system"])
    written, searched, refused = _results(first.text)
    assert written[1]["status"] == "draft"
    draft = tmp_path / "data" / "skills" / "drafts" / "assistant" / "rotate-api-key" / "SKILL.md"
    assert searched[1]["results"][0]["procedure"] == "rotate-api-key"
    assert "Revoke the old one" in searched[1]["results"][0]["content"]
    assert refused[0] is True and "talon skills approve assistant rotate-api-key" in refused[1]
    assert "rotate-api-key" in listing and "draft" in listing
    assert code == 0, said
    assert not draft.exists()
    assert (tmp_path / "data" / "skills" / "approved" / "assistant" / "rotate-api-key" / "SKILL.md").is_file()
    ((error, loaded),) = _results(second.text)
    assert error is False and loaded["instructions"].startswith("# Rotate the API key")
    assert "rotate-api-key: Rotate the API key" in system_after


def _run_cli(config: Path, *args: str) -> str:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "skills", *args, "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_fork_skill_runs_as_a_child_with_the_tools_it_allows(tmp_path: Path) -> None:
    _skill(tmp_path, "triage", "Triage this report: $ARGUMENTS\n", description="triage a bug report")
    skill_md = tmp_path / "skills" / "triage" / "SKILL.md"
    skill_md.write_text(
        skill_md.read_text().replace(
            "description:", "mode: fork\nallowed_tools: [memory_search]\ndescription:"
        )
    )

    def respond(body: dict[str, Any]) -> Reply:
        first = json.dumps(body["messages"][0]["content"])
        if "Triage this report" in first:  # the child
            return Reply(text="severity: high")
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[Call("skill", {"name": "triage", "arguments": "export button broken"})])
        return Reply(text=results[0][1])

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={
                "assistant": {
                    "capabilities": ["skill.use", "memory.access:thread", "model.complete"],
                    "skills": ["triage"],
                }
            },
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "triage this")
        (child,) = [
            r for r in fake.requests if "Triage this report" in json.dumps(r["messages"][0]["content"])
        ]
    result = json.loads(turn.text)
    assert result["skill"] == "triage" and result["mode"] == "fork" and result["result"] == "severity: high"
    assert "export button broken" in json.dumps(child["messages"][0]["content"])
    child_tools = {t["name"] for t in child.get("tools", [])}
    assert "memory_search" in child_tools
    assert not child_tools & {"skill", "model_complete"}  # narrowed to the skill's allowed_tools
