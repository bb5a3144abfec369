"""Chat commands through the in-process gateway on the console: /help answers with the table."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from connectors.base import IntakeStatus
from gateway.command_table import help_text
from tests.fakes.model_api import FakeAnthropic
from tests.harness import provider_for, running_gateway, write_config


async def test_help_on_the_console_lists_the_commands_and_starts_no_turn(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            console = gw.components.control.console(None)
            inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            with console.attach("main", inbox):
                result = await console.submit("main", "/help")
                async with asyncio.timeout(10):
                    item = await inbox.get()
                    while item["type"] != "message":
                        item = await inbox.get()
        assert result.status is IntakeStatus.STORED
        assert result.reply == help_text()
        assert item["text"] == help_text()
        assert "/stop" in item["text"] and "/new" in item["text"]
        assert fake.requests == []
