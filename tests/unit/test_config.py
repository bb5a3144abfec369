"""talon.yaml: substitution, validation, and error messages that name the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_settings
from gateway.personas import load_personas

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str, env: str | None = None) -> Path:
    (tmp_path / "talon.yaml").write_text(text)
    if env is not None:
        (tmp_path / ".env").write_text(env)
    return tmp_path / "talon.yaml"


def test_the_annotated_example_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "TELEGRAM_BOT_TOKEN",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "DISCORD_BOT_TOKEN",
    ):
        monkeypatch.setenv(var, "x" * 12)
    monkeypatch.setenv("TALON_WEB_SITE_TOKEN", "w" * 24)
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "g" * 24)
    settings = load_settings(ROOT / "deploy" / "talon.example.yaml")
    assert [c.type for c in settings.channels] == ["console", "telegram", "slack", "discord", "web"]


def test_env_file_and_environment_substitution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FROM_ENV", "env-wins")
    config = _write(
        tmp_path,
        "providers:\n  a: {type: openai, base_url: '${BASE}', api_key: '${FROM_ENV}'}\n"
        "  b: {type: openai, base_url: '${UNSET_VAR:-http://127.0.0.1:1/v1}'}\n",
        env="BASE=http://127.0.0.1:9/v1\nFROM_ENV=dotenv-loses\n",
    )
    settings = load_settings(config)
    assert settings.providers["a"].base_url == "http://127.0.0.1:9/v1"
    assert settings.providers["a"].api_key == "env-wins"
    assert settings.providers["b"].base_url == "http://127.0.0.1:1/v1"
    assert settings.data_path == (tmp_path / "data").resolve()


def test_all_problems_are_reported_together_with_key_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    config = _write(
        tmp_path,
        "timezone: Mars/Olympus\n"
        "workers: 3\n"
        "channels:\n"
        "  - {name: console, type: console}\n"
        "  - {name: tg, type: telegram, token: '${TELEGRAM_BOT_TOKEN}'}\n"
        "  - {name: irc, type: irc}\n"
        "  - {name: tg, type: discord, token: abcdefgh}\n"
        "queue: {workers: 0}\n"
        "bindings: [{channel: nope, persona: assistant}]\n",
    )
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    text = str(err.value)
    assert "timezone: unknown timezone 'Mars/Olympus'" in text
    assert "workers: unknown key" in text
    assert "channels[2].type: must be one of console, telegram, slack, discord" in text
    assert "queue.workers:" in text
    # Cross-field problems are only checked once the shapes are valid, so fix and re-check.
    config = _write(
        tmp_path,
        "channels:\n  - {name: tg, type: telegram, token: '${TELEGRAM_BOT_TOKEN}'}\n"
        "  - {name: tg, type: discord, token: abcdefgh}\n"
        "bindings: [{channel: nope, persona: assistant}]\n",
    )
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    problems = err.value.problems
    assert "channels[0].token: empty; set TELEGRAM_BOT_TOKEN in .env or remove this channel" in problems
    assert any(p.startswith("channels[1].name: 'tg' is used twice") for p in problems)
    assert any(p.startswith("bindings[0].channel: no channel named 'nope'") for p in problems)


def test_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="talon init"):
        load_settings(tmp_path / "nope.yaml")


def test_persona_problems_name_the_file_and_fix(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = _write(
        tmp_path,
        "providers: {local: {type: openai, base_url: 'http://127.0.0.1:9/v1'}, "
        "claude: {type: anthropic}}\n"
        "channels: [{name: console, type: console}]\n"
        "bindings: [{channel: console, persona: ghost}]\n",
    )
    for name, yaml_text in {
        "good": "model: local:llama\n",
        "typo": "model: lokal:llama\n",
        "keyless": "model: claude:sonnet\n",
        "badlabel": "model: local:x\ncapabilities: ['chanel.send:*']\n",
        "extra": "model: local:x\ncolour: red\n",
    }.items():
        folder = tmp_path / "personas" / name
        folder.mkdir(parents=True)
        (folder / "persona.yaml").write_text(yaml_text)
        (folder / "system.md").write_text(f"# {name}\n")
    with pytest.raises(ConfigError) as err:
        load_personas(load_settings(config))
    text = str(err.value)
    assert (
        "personas/typo/persona.yaml: model: 'lokal:llama' names the provider 'lokal', which talon.yaml "
        "does not define; did you mean local? use one of local, claude"
    ) in text
    assert "providers.claude.api_key: empty, but personas/keyless uses it" in caplog.text  # a warning only
    assert "personas/badlabel/persona.yaml: capabilities[0]:" in text and "chanel.send" in text
    assert "personas/extra/persona.yaml: colour: unknown key; remove it or check its spelling" in text
    assert "bindings[0].persona: no persona named 'ghost'" in text
