"""Every connector class has each member of :class:`connectors.base.Connector`, with the same
kind (attribute, method, coroutine) and parameters, on an instance built from default settings.

Nothing is started: the constructors open no connection.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from connectors.base import Connector, ConnectorHealth
from connectors.console import ConsoleConnector
from connectors.discord_bot import DiscordConnector
from connectors.slack import SlackConnector
from connectors.telegram import TelegramConnector
from connectors.web import WebConnector
from gateway.config import DiscordChannel, SlackChannel, TelegramChannel, WebChannel
from gateway.store.db import Database

BUILDERS: dict[str, Callable[[Path], Any]] = {
    # The console keeps what its windows saw in the database; nothing here reaches it.
    "console": lambda files: ConsoleConnector("team-console", cast(Database, None)),
    "telegram": lambda files: TelegramConnector(
        TelegramChannel(name="team-telegram", type="telegram", token="123456:contract"), files_dir=files
    ),
    "slack": lambda files: SlackConnector(
        SlackChannel(name="team-slack", type="slack", bot_token="xoxb-contract", app_token="xapp-contract"),
        files_dir=files,
    ),
    "discord": lambda files: DiscordConnector(
        DiscordChannel(name="team-discord", type="discord", token="contract-token"), files_dir=files
    ),
    "web": lambda files: WebConnector(
        WebChannel(name="team-web", type="web"),
        files_dir=files,
        db=cast(Database, None),
        data_path=files,
    ),
}

ATTRIBUTES = {"name": str, "health": ConnectorHealth, "idempotent_send": bool, "max_file_bytes": int}
METHODS = {
    name: member
    for name, member in vars(Connector).items()
    if inspect.isfunction(member) and not name.startswith("_")
}


def test_the_contract_declares_what_the_gateway_reads() -> None:
    assert set(Connector.__annotations__) == set(ATTRIBUTES)
    assert set(METHODS) == {"start", "stop", "render", "send", "send_file", "set_working"}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_connector_satisfies_the_contract(kind: str, tmp_path: Path) -> None:
    connector = BUILDERS[kind](tmp_path)
    assert isinstance(connector, Connector)
    for name, expected in ATTRIBUTES.items():
        assert isinstance(getattr(connector, name), expected), f"{kind}.{name}"
    assert connector.name == f"team-{kind}"
    for name, declared in METHODS.items():
        actual = getattr(connector, name)
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(declared), f"{kind}.{name}"
        wanted = list(inspect.signature(declared).parameters)[1:]  # without self
        assert list(inspect.signature(actual).parameters) == wanted, f"{kind}.{name}"


def test_only_the_gateways_own_channels_resend_after_a_crash(tmp_path: Path) -> None:
    idempotent = {kind: build(tmp_path).idempotent_send for kind, build in BUILDERS.items()}
    assert idempotent == {"console": True, "telegram": False, "slack": False, "discord": False, "web": True}


def test_upload_limits_are_the_platforms_unless_configured(tmp_path: Path) -> None:
    limits = {kind: build(tmp_path).max_file_bytes for kind, build in BUILDERS.items()}
    assert limits == {
        "console": 50_000_000,
        "telegram": 50_000_000,
        "slack": 1_000_000_000,
        "discord": 10_000_000,
        "web": 50_000_000,
    }
    custom = DiscordChannel(name="team-discord", type="discord", token="t", max_upload_bytes=25_000_000)
    assert DiscordConnector(custom, files_dir=tmp_path).max_file_bytes == 25_000_000
