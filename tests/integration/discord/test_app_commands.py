"""Discord application commands: the registered payload and where an interaction steers."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.discord_bot.commands import command_payload, interaction_origin
from connectors.discord_bot.inbound import normalize_text
from gateway.command_table import CHAT_COMMANDS


def test_the_payload_has_one_slash_command_per_chat_command_within_discords_limits() -> None:
    payload = command_payload()
    assert [(c["name"], c["description"]) for c in payload] == [(c.name, c.summary) for c in CHAT_COMMANDS]
    for command in payload:
        assert command["type"] == 1 and command["contexts"] == [0, 1]
        assert len(command["name"]) <= 32 and 1 <= len(command["description"]) <= 100


@pytest.mark.parametrize(
    ("raw", "origin"),
    [
        ({"channel_id": "10", "channel": {"id": "10", "type": 1}}, ("10", None, "dm")),
        ({"channel_id": "20", "guild_id": "1", "channel": {"id": "20", "type": 0}}, ("20", None, "group")),
        (
            {"channel_id": "30", "guild_id": "1", "channel": {"id": "30", "type": 11, "parent_id": "20"}},
            ("20", "30", "thread"),
        ),
        ({"channel_id": "30", "guild_id": "1", "channel": {"id": "30", "type": 11}}, ("30", None, "group")),
        ({"guild_id": "1"}, None),
        ({"channel_id": "../x"}, None),
        ({"channel_id": 5}, None),
    ],
)
def test_an_interaction_is_keyed_as_the_messages_of_its_channel(raw: dict[str, Any], origin: Any) -> None:
    assert interaction_origin(raw) == origin


def test_every_chat_command_addressed_to_any_bot_name_is_read_as_the_command() -> None:
    for command in CHAT_COMMANDS:
        assert normalize_text(f"/{command.name}@talonbot", bot_id=None, bot_name="other", mentions=[]) == (
            f"/{command.name}"
        )
