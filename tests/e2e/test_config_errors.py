"""Config errors a newcomer can act on, through the real ``talon`` command: one message per
cause, "did you mean" for misspelt keys, what was expected with an example instead of
pydantic's phrases, the provider and the ``.env`` behind a model reference, and the file and
line of a YAML error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.daemon import talon, talon_env

GOOD_CHANNELS = (
    "channels:\n  - {name: console, type: console}\nbindings:\n  - {channel: console, persona: assistant}\n"
)
PROVIDERS = (
    "providers:\n"
    "  anthropic: {type: anthropic, api_key: sk-test-key}\n"
    "  local: {type: openai, base_url: 'http://127.0.0.1:9/v1', api_key: none}\n"
)


def _bot(root: Path, talon_yaml: str, persona_yaml: str = "model: local:llama\n") -> Path:
    (root / "talon.yaml").write_text(talon_yaml)
    persona = root / "personas" / "assistant"
    persona.mkdir(parents=True, exist_ok=True)
    (persona / "persona.yaml").write_text(persona_yaml)
    (persona / "system.md").write_text("# Assistant\n")
    return root / "talon.yaml"


async def _problems(*args: str, env: dict[str, str] | None = None) -> list[str]:
    code, _, err = await talon(*args, env=env or talon_env())
    assert code == 2, err
    lines = err.splitlines()
    assert lines[0] == f"talon: {len(lines) - 1} config problem(s):", err
    assert "Traceback" not in err
    return [line.removeprefix("  - ") for line in lines[1:]]


async def test_an_undefined_provider_from_env_file_is_one_problem_naming_the_file(tmp_path: Path) -> None:
    config = _bot(tmp_path, PROVIDERS + GOOD_CHANNELS, 'model: "${TALON_MODEL:-anthropic:claude}"\n')
    (tmp_path / ".env").write_text("TALON_MODEL=openrouter:gpt-4o\n")
    problems = await _problems("run", "-c", str(config))
    assert problems == [
        f"personas/assistant/persona.yaml: model: 'openrouter:gpt-4o' (from TALON_MODEL in {tmp_path}/.env) "
        "names the provider 'openrouter', which talon.yaml does not define; use one of anthropic, local "
        "(e.g. anthropic:gpt-4o) or add providers.openrouter to talon.yaml"
    ]


async def test_a_model_from_the_environment_says_so_and_suggests_the_provider(tmp_path: Path) -> None:
    config = _bot(tmp_path, PROVIDERS + GOOD_CHANNELS, 'model: "${TALON_MODEL}"\n')
    (tmp_path / ".env").write_text("TALON_MODEL=local:from-dotenv\n")
    problems = await _problems("run", "-c", str(config), env=talon_env({"TALON_MODEL": "lokal:llama"}))
    assert len(problems) == 1
    assert problems[0].startswith(
        "personas/assistant/persona.yaml: model: 'lokal:llama' (from the environment variable TALON_MODEL) "
        "names the provider 'lokal', which talon.yaml does not define; did you mean local?"
    )


async def test_every_config_and_persona_problem_is_reported_once(tmp_path: Path) -> None:
    config = _bot(
        tmp_path,
        PROVIDERS + GOOD_CHANNELS + "  - {channel: console, chat: other, persona: helper}\n",
        "model: local:llama\ncapabilites: []\n",
    )
    helper = tmp_path / "personas" / "helper"
    helper.mkdir()
    (helper / "persona.yaml").write_text("model: nothing-here\n")
    (helper / "system.md").write_text("# Helper\n")
    problems = await _problems("run", "-c", str(config))
    assert problems == [
        "personas/assistant/persona.yaml: capabilites: unknown key; did you mean capabilities?",
        "personas/helper/persona.yaml: model: 'nothing-here' must be '<provider>:<model>', "
        "e.g. anthropic:<model name>",
    ]


async def test_misspelt_keys_get_the_closest_key_at_their_level(tmp_path: Path) -> None:
    config = _bot(
        tmp_path,
        "dta_dir: data\n"
        "providers:\n  local: {type: openai, base_url: 'http://127.0.0.1:9/v1', timout: 3}\n"
        "channels:\n"
        "  - {name: console, type: console}\n"
        "  - {name: tg, type: telegram, token: abcdefgh, require_mentoin: false, pacing: {per_chat: 1}}\n"
        "  - {name: tg2, type: telegrm, token: abcdefgh}\n"
        "bindings:\n  - {channel: consol, persona: assistant}\n",
    )
    problems = await _problems("run", "-c", str(config))
    assert sorted(problems) == [
        "bindings[0].channel: no channel named 'consol'; did you mean 'console'? use one of console, tg, tg2",
        "channels[1].pacing.per_chat: unknown key; did you mean per_chat_per_second?",
        "channels[1].require_mentoin: unknown key; did you mean require_mention?",
        "channels[2].type: must be one of console, telegram, slack, discord, web; did you mean telegram?",
        "dta_dir: unknown key; did you mean data_dir?",
        "providers.local.timout: unknown key; did you mean timeout?",
    ]


async def test_wrong_values_say_what_was_expected_with_an_example(tmp_path: Path) -> None:
    config = _bot(
        tmp_path,
        PROVIDERS
        + "log_level: inf\n"
        + "queue: {workers: '${WORKERS}', max_attempts: 0}\n"
        + "channels:\n"
        + "  - {name: console, type: console}\n"
        + "  - {name: tg, type: telegram, token: abcdefgh, pacing: {burst: lots}, rate_limit: {window: ten}}\n"
        + "bindings:\n  - {channel: console, persona: assistant}\n",
        "model: local:llama\nmax_turns: many\n",
    )
    (tmp_path / ".env").write_text("WORKERS=plenty\n")
    code, _, err = await talon("run", "-c", str(config))
    assert code == 2
    assert "Input should" not in err and "unable to parse" not in err
    assert "log_level: must be one of debug, info, warning, error, not 'inf'; did you mean info?" in err
    assert (
        f"queue.workers: expected a whole number, not 'plenty' (from WORKERS in {tmp_path}/.env); e.g. workers: 32"
        in err
    )
    assert "queue.max_attempts: must be 1 or more, not 0; e.g. max_attempts: 5" in err
    assert "channels[1].pacing.burst: expected a whole number, not 'lots'; e.g. burst: 3" in err
    assert "channels[1].rate_limit.window: expected a number, not 'ten'; e.g. window: 60" in err


async def test_persona_values_say_what_was_expected_too(tmp_path: Path) -> None:
    config = _bot(tmp_path, PROVIDERS + GOOD_CHANNELS, "model: local:llama\nmax_turns: many\n")
    problems = await _problems("run", "-c", str(config))
    assert problems == [
        "personas/assistant/persona.yaml: max_turns: expected a whole number, not 'many'; e.g. max_turns: 10"
    ]


@pytest.mark.parametrize("command", ["run", "doctor"])
async def test_yaml_errors_name_the_file_and_line(tmp_path: Path, command: str) -> None:
    config = _bot(tmp_path, PROVIDERS + "channels: [\n  {name: console, type: console}\n")
    problems = await _problems(command, "-c", str(config))
    assert len(problems) == 1
    assert problems[0] == (
        f"{config}, line 6, column 1: not valid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence, which starts on line 4)"
    )
    assert "<unicode string>" not in problems[0]


async def test_a_persona_yaml_error_names_the_persona_file_and_line(tmp_path: Path) -> None:
    config = _bot(tmp_path, PROVIDERS + GOOD_CHANNELS, "model: local:llama\n\tcapabilities: []\n")
    problems = await _problems("run", "-c", str(config))
    assert problems == [
        "personas/assistant/persona.yaml, line 2, column 1: not valid YAML: found character '\\t' that "
        "cannot start any token (while scanning for the next token); YAML indents with spaces, not tabs"
    ]
