"""Sub-agent definition files: the built-ins, user overrides, and errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError
from gateway.subagents import load_definitions
from gateway.subagents.definitions import parse_definition
from tests.unit.subagents.support import BUILTINS, write_definition

DEFAULT_MODELS = {
    "session-summarizer": ("anthropic:claude-sonnet-4-6",),
    "memory-retriever": ("anthropic:claude-haiku-4-5",),
    "memory-groomer": ("anthropic:claude-haiku-4-5",),
    "file-searcher": ("anthropic:claude-haiku-4-5",),
    "spark-coder": ("openai:gpt-5.4-spark",),
}


def test_builtins_ship_with_the_reference_models(tmp_path: Path) -> None:
    definitions = load_definitions(tmp_path)
    assert set(definitions) == set(BUILTINS)
    assert {n: d.models for n, d in definitions.items()} == DEFAULT_MODELS
    for definition in definitions.values():
        assert definition.builtin and definition.prompt and definition.output_schema
    assert definitions["spark-coder"].required_env == ("OPENAI_API_KEY",)
    assert definitions["memory-retriever"].required_capabilities == ("memory.access:thread",)


def test_a_config_dir_file_adds_and_overrides(tmp_path: Path) -> None:
    write_definition(
        tmp_path,
        "mine.md",
        """
        name: translator
        description: Translate text.
        model: [local:qwen, anthropic:claude-haiku-4-5]
        max_tokens: 512
        timeout: 20
        """,
        "Translate the input to French.",
    )
    write_definition(
        tmp_path,
        "retriever.md",
        """
        name: memory-retriever
        description: My own retriever.
        model: local:small
        """,
        "Rank memory items, strictly.",
    )
    definitions = load_definitions(tmp_path)
    translator = definitions["translator"]
    assert translator.models == ("local:qwen", "anthropic:claude-haiku-4-5")
    assert (translator.max_tokens, translator.timeout, translator.output_schema) == (512, 20.0, None)
    assert translator.prompt == "Translate the input to French."
    retriever = definitions["memory-retriever"]
    assert retriever.prompt == "Rank memory items, strictly." and not retriever.builtin
    assert retriever.models == ("local:small",)
    # An override keeps the built-in's output_schema, which its data handling relies on.
    assert retriever.output_schema == load_definitions(None)["memory-retriever"].output_schema


def test_output_schema_may_be_a_json_string(tmp_path: Path) -> None:
    write_definition(
        tmp_path,
        "j.md",
        """
        name: j
        description: JSON schema as a string.
        model: local:m
        output_schema: '{"type": "object", "required": ["answer"]}'
        """,
    )
    assert load_definitions(tmp_path)["j"].output_schema == {"type": "object", "required": ["answer"]}


def test_bad_user_files_are_reported_together_naming_file_and_key(tmp_path: Path) -> None:
    write_definition(
        tmp_path,
        "a.md",
        """
        name: a
        description: Broken in several keys.
        model: no-provider-here
        timeout: -1
        colour: blue
        required_capabilities: [memory.access:everything]
        """,
    )
    write_definition(
        tmp_path,
        "b.md",
        """
        name: b
        description: Bad schema.
        model: local:m
        output_schema: {type: objekt}
        """,
    )
    (tmp_path / "subagents" / "c.md").write_text("no front matter here\n", encoding="utf-8")
    write_definition(tmp_path, "d.md", "name: d\nmodel: local:m")
    with pytest.raises(ConfigError) as caught:
        load_definitions(tmp_path)
    problems = caught.value.problems
    folder = tmp_path / "subagents"

    def about(file: str, key: str) -> str:
        found = [p for p in problems if p.startswith(f"{folder}/{file}: {key}")]
        assert found, f"no problem for {file} {key} in {problems}"
        return found[0]

    assert "'<provider>:<model>'" in about("a.md", "model")
    assert "greater than 0" in about("a.md", "timeout")
    assert "unknown key" in about("a.md", "colour")
    assert "memory.access:thread" in about("a.md", "required_capabilities")
    assert "not a valid JSON Schema" in about("b.md", "output_schema")
    assert "front matter" in about("c.md", "must start")
    assert "required" in about("d.md", "description")
    assert len(problems) == 7, problems


def test_the_same_name_twice_in_the_config_dir_is_an_error(tmp_path: Path) -> None:
    write_definition(tmp_path, "one.md", "name: twin\ndescription: x\nmodel: local:m")
    write_definition(tmp_path, "two.md", "name: twin\ndescription: y\nmodel: local:m")
    with pytest.raises(ConfigError, match=r"two\.md: name: 'twin' is already defined by .*one\.md"):
        load_definitions(tmp_path)


def test_an_empty_prompt_is_an_error() -> None:
    definition, problems = parse_definition("---\nname: x\ndescription: d\nmodel: a:b\n---\n\n", "x.md")
    assert definition is None
    assert problems == ["x.md: the prompt is empty; write it below the front matter"]


def test_unclosed_front_matter_is_an_error() -> None:
    _, problems = parse_definition("---\nname: x\n", "x.md")
    assert problems == ["x.md: the front matter is not closed; add a '---' line after it"]
