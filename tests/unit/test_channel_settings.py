"""Every channel's settings share :class:`gateway.config.ChannelBase`: what the gateway reads
from any channel (name, type, home_chat, max_inbound_chars, the intake rate) reads the same
for the console and the chat platforms, and the keys a user writes stay per type."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from gateway.config import ChannelBase, ChannelSettings, ConfigError, Settings, load_settings

CHANNEL_TYPES = typing.get_args(typing.get_args(ChannelSettings)[0])


def test_every_channel_type_has_the_base_keys() -> None:
    assert {model.__name__ for model in CHANNEL_TYPES} == {
        "ConsoleChannel",
        "TelegramChannel",
        "SlackChannel",
        "DiscordChannel",
        "WebChannel",
    }
    for model in CHANNEL_TYPES:
        assert issubclass(model, ChannelBase)
        assert set(ChannelBase.model_fields) <= set(model.model_fields), model.__name__


def test_console_and_chat_channels_read_alike() -> None:
    settings = Settings.model_validate(
        {
            "channels": [
                {"name": "console", "type": "console"},
                {"name": "team-telegram", "type": "telegram", "token": "123:abc", "home_chat": -100123},
                {"name": "team-slack", "type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1"},
            ]
        }
    )
    console, telegram, slack = settings.channels
    assert [c.home_chat for c in settings.channels] == ["main", "-100123", None]
    assert all(c.max_inbound_chars == 20_000 for c in settings.channels)
    assert console.intake_rate is None  # only the daemon's owner reaches the console
    assert telegram.intake_rate is not None and telegram.intake_rate.per_chat == 30
    assert slack.intake_rate == slack.rate_limit


def test_the_console_takes_no_chat_channel_keys(tmp_path: Path) -> None:
    (tmp_path / "talon.yaml").write_text(
        "channels:\n  - {name: console, type: console, rate_limit: {per_chat: 5}, allowed_users: [u1]}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "talon.yaml")
    assert sorted(caught.value.problems) == [
        "channels[0].allowed_users: unknown key; remove it or check its spelling",
        "channels[0].rate_limit: unknown key; remove it or check its spelling",
    ]


def test_typing_interval_has_each_platforms_default() -> None:
    defaults = {
        model.__name__: model.model_fields["typing_interval"].default
        for model in CHANNEL_TYPES
        if "typing_interval" in model.model_fields
    }
    assert defaults == {"TelegramChannel": 4.0, "DiscordChannel": 8.0}  # Slack reacts, no refresh
