"""The daemon's host tools reach the services behind them: a turn's toolbox runs the delegation
tools and ``subagent_invoke`` against the running gateway's delegation and sub-agent runner."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.runtime.model import ToolCall
from tests.fakes.model_api import FakeAnthropic
from tests.harness import provider_for, running_gateway, write_config
from tests.integration.host_tools.conftest import add_thread


async def test_a_turns_toolbox_reaches_delegation_and_the_sub_agent_runner(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["persona.send:*", "subagent.invoke"]}, "helper": {}},
        )
        async with running_gateway(config) as gw:
            host_tools = gw.components.host_tools
            assert host_tools is not None
            thread_id = await add_thread(gw.components.db, chat="t")
            with host_tools.toolbox(gw.personas["assistant"], thread_id, run_id=90) as box:
                cards = await box.call(ToolCall("c1", "persona_list", {}))
                invoked = await box.call(ToolCall("c2", "subagent_invoke", {"name": "nope", "input": {}}))

    assert not cards.is_error and [c["name"] for c in json.loads(cards.content)] == ["helper"]
    assert invoked.is_error and invoked.content.startswith(
        "unknown sub-agent 'nope'; this persona may invoke"
    )
