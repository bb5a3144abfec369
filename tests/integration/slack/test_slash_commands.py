"""Slash command payloads -> chat commands, and which thread each one steers."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.base import ThreadKey
from connectors.slack.commands import CommandThreads, parse_slash_command
from connectors.slack.inbound import SkipEvent


def payload(**fields: Any) -> dict[str, Any]:
    base = {
        "command": "/stop",
        "text": "",
        "channel_id": "C0GENERAL",
        "user_id": "U0HUMAN01",
        "user_name": "ada",
        "trigger_id": "1.2.abc",
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("command", "text", "chat_text"),
    [
        ("/stop", "", "/stop"),
        ("/STOP", "  now ", "/stop now"),
        ("/help", "", "/help"),
        ("/talon", "new", "/new"),
        ("/talon", "/new please", "/new please"),
        ("/talon", "", None),
        ("/talon", "dance", None),
        ("/deploy", "stop", "/stop"),
    ],
)
def test_a_command_maps_to_the_chat_command_it_names(command: str, text: str, chat_text: str | None) -> None:
    assert parse_slash_command(payload(command=command, text=text)).chat_text == chat_text


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        payload(trigger_id=None),
        payload(user_id=""),
        payload(channel_id=7),
        payload(command="stop"),
        payload(text=["x"]),
        payload(text="x" * 5000),
        payload(channel_id="C" * 300),
    ],
)
def test_a_malformed_payload_is_skipped_as_malformed(body: Any) -> None:
    with pytest.raises(SkipEvent) as raised:
        parse_slash_command(body)
    assert raised.value.malformed


def test_a_missing_user_name_falls_back_to_the_user_id() -> None:
    body = payload()
    del body["user_name"]
    assert parse_slash_command(body).user_name == "U0HUMAN01"


def test_a_command_steers_the_users_last_thread_else_the_channels_latest() -> None:
    threads = CommandThreads("team-slack")
    ada = ThreadKey("team-slack", "C0GENERAL", "100.1")
    bob = ThreadKey("team-slack", "C0GENERAL", "200.2")
    assert threads.thread_for("C0GENERAL", "U0ADA") == ThreadKey("team-slack", "C0GENERAL", None)
    threads.addressed(ada, "U0ADA")
    threads.addressed(bob, "U0BOB")
    assert threads.thread_for("C0GENERAL", "U0ADA") == ada
    assert threads.thread_for("C0GENERAL", "U0BOB") == bob
    assert threads.thread_for("C0GENERAL", "U0CAROL") == bob  # the channel's latest
    assert threads.thread_for("C0OTHER01", "U0ADA") == ThreadKey("team-slack", "C0OTHER01", None)
    # a DM is one conversation, whatever was seen elsewhere
    assert threads.thread_for("D0DM00001", "U0ADA") == ThreadKey("team-slack", "D0DM00001", None)
